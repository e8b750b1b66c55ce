"""Our step-level credit inside TRL: ``StepCreditGRPOTrainer(estimator="gigpo", ...)``.

TRL's ``GRPOTrainer`` plays a multi-turn episode as one completion (the model's turns, each
followed by the ``act`` tool's answer) and gives every token of it one advantage, computed from
the episode's reward alone. This subclass gives each env step's tokens the advantage a registry
estimator gives that step, on the rows of the batch's groups, as our trainer does:

1. **the steps**: each rollout's :class:`~agentbench_rl.integrations.trl.AgentEnvironment`
   records its steps as the episode driver does (:func:`~agentbench_rl.rollout.episode.
   step_fields`: the observation and state acted on, the canonical action, the reward, validity,
   the observation it led to); the rows of one dataset prompt (TRL repeats it
   ``num_generations`` times, consecutively) are one group, each rollout a trajectory, its
   success the env's ``won``. A rollout that stops before its episode ends is played out with
   invalid empty actions (``AgentEnvironment.get_reward``), each charged the invalid penalty by
   the estimator, so stopping never scores better than acting;
2. **the credit**: the estimator with our trainer's parameters (``TrainConfig.estimator_spec``:
   γ 0.95 and an invalid step's penalty 0.1 where it takes them, ``estimator_params`` on top);
3. **the tokens** (:func:`token_advantages`): the model's turns are the runs of model tokens in
   TRL's ``tool_mask`` (tool answers are 0 there), in order, one per assistant message of the
   rollout's conversation. A turn carries the mean advantage of the env steps its tool calls
   made (one, as a rule); a turn that made none (the closing message, a call TRL could not
   make, a call after the episode's end) carries 0, but the last turn also answers for the
   steps played out after it (it chose to stop). Prompt, tool-answer and padding tokens carry 0.
   The loss is TRL's own, which takes advantages of shape (batch, tokens).

The estimator's output is used as it comes (each normalises its own way, as in our trainer);
TRL's ``scale_rewards`` then plays no part. One process only: a group's rollouts must all be in
this process's batch (TRL spreads them across processes), which a multi-process run refuses.

Example (the token rule alone):
    >>> token_advantages([1, 1, 0, 0, 1, 1, 0, 1], [1, 1, 0], [0.5, -0.25]).tolist()
    [0.5, 0.5, 0.0, 0.0, -0.25, -0.25, 0.0, 0.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from trl import GRPOTrainer

from agentbench_rl.core.batch import StepBatch, StepRecord
from agentbench_rl.estimators import EstimatorParams
from agentbench_rl.integrations.trl import AgentEnvironment
from agentbench_rl.train.config import TrainConfig


def token_advantages(
    model_mask: Sequence[int], steps_per_turn: Sequence[int], step_advantages: Sequence[float]
) -> np.ndarray:
    """One completion's per-token advantages (the module's rule 3): ``model_mask`` is 1 on the
    model's tokens (TRL's ``completion_mask * tool_mask``), ``steps_per_turn`` the env steps each
    assistant turn made, ``step_advantages`` the estimator's value of each of the episode's
    steps in order; the steps no turn made (the episode played out) belong to the last turn."""
    mask = np.asarray(model_mask, dtype=bool)
    values = np.zeros(len(mask))
    starts = np.flatnonzero(mask & ~np.concatenate([[False], mask[:-1]]))
    ends = np.flatnonzero(mask & ~np.concatenate([mask[1:], [False]])) + 1
    taken = 0
    for turn, (start, end) in enumerate(zip(starts, ends, strict=True)):
        made = steps_per_turn[turn] if turn < len(steps_per_turn) else 0
        last = turn == len(starts) - 1
        mine = step_advantages[taken:] if last else step_advantages[taken : taken + made]
        if len(mine):
            values[start:end] = float(np.mean(mine))
        taken += made
    return values


def steps_per_turn(messages: Sequence[dict[str, Any]], calls: Sequence[bool]) -> list[int]:
    """How many env steps each assistant message of a rollout made. ``calls`` says, for each
    call that reached the env's ``act`` (in order), whether it made a step (a call after the
    end does not). A message's calls reach ``act`` in order when they name it with exactly its
    argument (TRL cannot make any other call); the messages are read, not the tool answers,
    which TRL drops when they would pass the length limit although the step was made."""
    counts: list[int] = []
    reached = 0
    for message in messages:
        if message.get("role") != "assistant":
            continue
        made = 0
        for call in message.get("tool_calls") or []:
            function = call.get("function", {}) if isinstance(call, dict) else {}
            arguments = function.get("arguments")
            if (
                function.get("name") == "act"
                and isinstance(arguments, dict)
                and set(arguments) == {"action"}
            ):
                made += int(reached < len(calls) and calls[reached])
                reached += 1
        counts.append(made)
    return counts


def episode_records(environment: AgentEnvironment, group: int, traj: int) -> list[StepRecord]:
    """A rollout's rows: its recorded steps, with its group, trajectory and success."""
    if not environment.steps:
        raise ValueError(f"rollout {traj} made no step: was the episode played out (get_reward)?")
    return [
        {**fields, "group": group, "traj": traj, "success": environment.won}
        for fields in environment.steps
    ]


class StepCreditGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose every env step's tokens carry ``estimator``'s credit (module
    docstring); ``environment_factory`` must make :class:`AgentEnvironment` instances
    (:func:`~agentbench_rl.integrations.trl.environment_class`).

    Args:
        estimator: A registry name (``agentbench-rl estimators`` lists them).
        estimator_params: Its parameters (``{"anchor": "state"}``), over our trainer's
            ``gamma`` and ``invalid_penalty``.
        *args, **kwargs: ``GRPOTrainer``'s.
    """

    def __init__(
        self,
        *args: Any,
        estimator: str = "gigpo",
        estimator_params: EstimatorParams | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        if self.environment_factories is None:
            raise ValueError("StepCreditGRPOTrainer needs an environment_factory (our envs)")
        if self.accelerator.num_processes > 1:
            raise NotImplementedError(
                "StepCreditGRPOTrainer runs on one process: TRL spreads a group's rollouts "
                "across processes, and the estimator needs the whole group"
            )
        # the trainer's gamma and invalid_penalty where the estimator takes them, as ours has
        config = TrainConfig(estimator=estimator, estimator_params=dict(estimator_params or {}))
        self.estimator = config.estimator_spec()
        self._conversations: list[list[dict[str, Any]]] = []

    def _generate(self, prompts: list[Any]) -> Any:
        generated = super()._generate(prompts)
        self._conversations = generated[3]  # the rollouts' messages, for the turns' steps
        return generated

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        output["advantages"] = self.step_advantages(output)
        return output

    def step_advantages(self, output: dict[str, Any]) -> torch.Tensor:
        """The (batch, tokens) advantages of the batch just generated (module docstring)."""
        environments = self.environments
        size = self.num_generations if self.model.training else self.num_generations_eval
        records: list[StepRecord] = []
        spans: list[tuple[int, int]] = []  # each rollout's rows in ``records``
        for index, environment in enumerate(environments):
            if not isinstance(environment, AgentEnvironment):
                raise TypeError(
                    f"rollout {index}: {type(environment).__name__} is not one of our envs"
                )
            group = index // size
            leader = environments[group * size]
            if environment.task != leader.task:
                raise ValueError(
                    f"rollout {index} plays {environment.task}, its group {group} {leader.task}: "
                    "a group must be one prompt's num_generations rollouts"
                )
            rows = episode_records(environment, group, index)
            spans.append((len(records), len(records) + len(rows)))
            records.extend(rows)
        values = self.estimator.compute(StepBatch.from_records(records))
        advantages = np.asarray(values.advantages, dtype=float)
        mask = output["completion_mask"]
        if "tool_mask" in output:
            mask = mask * output["tool_mask"]
        per_token = []
        for index, (start, end) in enumerate(spans):
            per_token.append(
                token_advantages(
                    mask[index].tolist(),
                    steps_per_turn(self._conversations[index], environments[index].calls),
                    advantages[start:end].tolist(),
                )
            )
        return torch.tensor(np.stack(per_token), dtype=torch.float32, device=mask.device)
