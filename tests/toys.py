"""A toy environment and a toy estimator, registered the way CONTRIBUTING.md says.

``tests/conftest.py`` registers them when ``AGENTBENCH_TEST_TOYS=1``; ``tests/test_contributing.py``
then runs the shared suites (the env contract, the estimator properties) and checks that they
covered the toys. The code below is the walk-through's code, so the walk-through runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from agentbench_rl.core.batch import StepBatch
from agentbench_rl.core.hashing import stable_hash
from agentbench_rl.envs import register_env
from agentbench_rl.envs.base import TextAgentEnv, Transition
from agentbench_rl.estimators import EstimatorResult, register
from agentbench_rl.estimators.common import Norm, base_diagnostics, episode_advantage

TOY_ENV = "toy_counter"
TOY_ESTIMATOR = "toy_mean_baseline"


# --- Adding an environment: one class, one registration line --------------------------------
class CounterEnv(TextAgentEnv[str]):
    """Count up to the task's target: ``inc`` adds one, ``dec`` takes one away."""

    env_name: ClassVar[str] = TOY_ENV
    prompt_instruction: ClassVar[str] = "Reach the target number with inc and dec."
    action_aliases: ClassVar[dict[str, str]] = {"+": "inc", "-": "dec"}
    default_max_steps: ClassVar[int] = 8
    TASKS: ClassVar[dict[str, list[str]]] = {
        "test": [f"count-{n}" for n in range(1, 6)],
        "train": [f"count-{n}" for n in range(1, 4)],
    }

    @classmethod
    def splits(cls) -> Sequence[str]:
        return tuple(cls.TASKS)

    @classmethod
    def task_ids(cls, split: str) -> list[str]:
        if split not in cls.TASKS:
            raise ValueError(f"{TOY_ENV}: unknown split '{split}'")
        return list(cls.TASKS[split])

    @classmethod
    def split_checksum(cls, split: str) -> str:
        return stable_hash(cls.task_ids(split))[:32]

    def _sample_task_id(self) -> str:
        tasks = self.task_ids(self.split)
        return tasks[int(self.np_random.integers(len(tasks)))]

    def _load_task(self, task_id: str) -> None:
        if task_id not in self.task_ids(self.split):
            raise ValueError(f"{TOY_ENV}: unknown task id '{task_id}' in split '{self.split}'")
        self.target, self.value = int(task_id.split("-")[1]), 0

    def _apply(self, action: str) -> Transition:
        if action not in ("inc", "dec"):
            return Transition(reward=0.0, valid=False, feedback="Nothing happens.")
        self.value += 1 if action == "inc" else -1
        return Transition(reward=1.0 if self.won() else 0.0, valid=True)

    def _observation(self) -> str:
        return f"target {self.target}, value {self.value}"

    def _obs_hash(self) -> str:
        return stable_hash(self._observation())

    def _state_hash(self) -> str:
        return stable_hash([self.target, self.value])

    def admissible_actions(self) -> list[str]:
        return ["inc", "dec"]

    def won(self) -> bool:
        return self.value == self.target

    def category(self) -> str:
        return "small" if self.target <= 2 else "large"

    def expert_action(self) -> str:
        return "inc" if self.value < self.target else "dec"


# --- Adding an estimator: one function, one decorator -------------------------------------
def mean_baseline(
    batch: StepBatch, *, norm: Norm = "mean", invalid_penalty: float = 0.0
) -> EstimatorResult:
    """The episode score minus its group's mean (GRPO's episode term, one line)."""
    advantages = episode_advantage(batch, norm, "rows", invalid_penalty)
    return EstimatorResult(np.asarray(advantages, dtype=np.float64), base_diagnostics(batch))


def register_toys() -> None:
    """The two registration lines of the walk-throughs."""
    register_env(TOY_ENV, "agentbench/ToyCounter-v0", "toys:CounterEnv")
    register(TOY_ESTIMATOR)(mean_baseline)
