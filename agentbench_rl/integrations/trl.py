"""Our envs as TRL environments: ``GRPOTrainer(environment_factory=environment_class(spec))``.

TRL's ``environment_factory`` (trl >= 1.16, transformers >= 5.2) makes one environment per
rollout and calls, in this order: ``reset(**row)`` with the dataset row (its string is appended
to the prompt), the environment's public methods as tools while the model calls them, and
``get_reward()`` once the rollout ends. Here:

- the dataset (:func:`train_dataset`) holds tasks of the env's fixed train split drawn from a
  seed, one row per task with its ``task_id`` and env ``seed``, so ``reset`` plays
  ``env.reset(seed=seed, options={"task_id": task_id})`` exactly as our trainer would;
- the one tool is ``act(action)``: the env's command (its raw text) as the tool call's
  argument; it answers the next observation and the admissible actions;
- ``get_reward`` is the episode's return, the sum of the env's rewards.

The env may be local or served (``server``: ``agentbench-rl serve-env``'s URL).

Per-token advantages: TRL's GRPO loss accepts advantages of shape (batch, tokens) from a
subclass (``GRPOTrainer._compute_loss`` unsqueezes only a 1-d tensor), but a whole multi-turn
episode is one completion whose advantage ``_generate_and_score_completions`` computes from the
episode's rewards alone; the step boundaries inside a completion (which tokens belong to which
``act`` call) are not passed to it. Our step-level estimators need those boundaries and each
step's observation key; this adapter does not plug them in (see README, "TRL").
"""

from __future__ import annotations

from typing import Any, ClassVar

from agentbench_rl.envs import env_class
from agentbench_rl.envs.base import TextAgentEnv
from agentbench_rl.envs.spec import EnvSpec
from agentbench_rl.rollout.episode import episode_seed

#: What the model is told beside the env's own instruction.
TOOL_INSTRUCTION = "Call the act tool with one action at a time until the episode ends."


def describe(observation_text: str, info: dict[str, Any]) -> str:
    """What a tool call answers: the observation and the actions admissible now.

    Example:
        >>> describe("#@ #", {"admissible_actions": ["up", "down"]})
        '#@ #\\nAdmissible actions: up, down'
    """
    actions = ", ".join(info["admissible_actions"])
    return f"{observation_text}\nAdmissible actions: {actions}"


class AgentEnvironment:
    """One of our envs for TRL (module docstring); :func:`environment_class` binds the env."""

    spec: ClassVar[EnvSpec]
    server: ClassVar[str | None] = None

    def __init__(self) -> None:
        self.env: TextAgentEnv[Any] = self.spec.make(self.server)
        self.episode_return = 0.0
        self.over = True

    def reset(self, task_id: str, seed: int, **_: Any) -> str:
        """Start the row's episode; returns the first observation (TRL appends it to the
        prompt). The row's other columns (``prompt``) are TRL's."""
        _, info = self.env.reset(seed=seed, options={"task_id": task_id})
        self.episode_return, self.over = 0.0, False
        return describe(self.env.observation_text(), info)

    def act(self, action: str) -> str:
        """Take one action in the environment.

        Args:
            action: The action, one of the admissible actions listed in the last observation.
        """
        if self.over:
            return "The episode is over."
        _, reward, terminated, truncated, info = self.env.step(action)
        self.episode_return += reward
        self.over = terminated or truncated
        text = describe(self.env.observation_text(), info)
        if self.over:
            outcome = "solved" if info["won"] else "not solved"
            return f"{text}\nThe episode is over ({outcome})."
        return text

    def get_reward(self) -> float:
        """The episode's return (TRL calls it once the rollout ends)."""
        return self.episode_return


def environment_class(spec: EnvSpec, server: str | None = None) -> type[AgentEnvironment]:
    """The class TRL's ``environment_factory`` takes for ``spec``'s env (TRL lists a class's
    methods as its tools, so each env gets a class of its own)."""
    name = f"{env_class(spec.name).__name__.removesuffix('Env')}Environment"
    return type(name, (AgentEnvironment,), {"spec": spec, "server": server})


def train_dataset(spec: EnvSpec, rows: int, seed: int) -> Any:
    """``rows`` tasks of ``spec``'s split drawn from ``seed`` (as our trainer draws them), each
    with the env seed the harness would give it (``episode_seed``) and the prompt: a
    ``datasets.Dataset`` for ``GRPOTrainer``."""
    from datasets import Dataset

    instruction = f"{env_class(spec.name).prompt_instruction} {TOOL_INSTRUCTION}"
    tasks = spec.draw_tasks(rows, seed)
    return Dataset.from_list(
        [
            {
                "prompt": [{"role": "user", "content": instruction}],
                "task_id": task,
                "seed": episode_seed(seed, task),
            }
            for task in tasks
        ]
    )
