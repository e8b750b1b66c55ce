"""Every estimator of this package as slime's custom advantage function (THUDM/slime).

slime calls the function ``--custom-advantage-function-path`` names as ``fn(args,
rollout_data)`` after its KL step (``slime/backends/megatron_utils/loss.py``), and the function
writes ``rollout_data["advantages"]`` and ``rollout_data["returns"]``: one tensor per sample,
one value per response token (``rollout_data["response_lengths"]``). slime is not on the
package index (it trains on Megatron with SGLang rollouts, on GPUs), so this is a file-level
drop-in, tested here on a ``rollout_data`` of those keys.

A step estimator needs per-step keys that slime's samples do not carry by default: one sample
per env step, each with its step record under :data:`STEPS_KEY` (the record our verl agent loop
writes, :data:`~agentbench_rl.integrations.verl.advantages.RECORD_FIELDS`, plus ``group``: the
task's group id, and ``member``: the trajectory's number in its group), put there by the rollout
function that plays the env. The rows then map to a
:class:`~agentbench_rl.core.batch.StepBatch` as verl's do
(:func:`~agentbench_rl.integrations.verl.advantages.row_advantages`: the success reward on a won
trajectory's last step, or the env's step rewards), and every response token of a sample
gets its step's advantage; the returns are the advantages, as slime's GRPO writes them. slime's
KL is left to its KL loss (``--use-kl-loss``), and its ``--normalize-advantages`` whitens after.

Two lines::

    --custom-advantage-function-path agentbench_rl.integrations.slime.gigpo
    # each sample's step record in rollout_data["agentbench_steps"]

Every registered name is a function of this module (``...slime.grpo``, ``...slime.crbc``, ...)
with the estimator's defaults and success rewards; another setting is a two-line module of the
user's: ``functools.partial(advantages, estimator=EstimatorSpec("gigpo", {"omega": 0.5}),
reward="env")``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

from agentbench_rl.estimators import EstimatorSpec, available
from agentbench_rl.estimators.common import AdvantageNorm
from agentbench_rl.integrations.verl.advantages import row_advantages
from agentbench_rl.rollout.batched import Reward

#: Where each sample's step record lives in slime's ``rollout_data``.
STEPS_KEY = "agentbench_steps"


def advantages(
    args: Any,
    rollout_data: MutableMapping[str, Any],
    *,
    estimator: EstimatorSpec,
    reward: Reward = "success",
    success_reward: float = 10.0,
    advantage_norm: AdvantageNorm = "none",
) -> None:
    """slime's custom advantage step with ``estimator`` (module docstring): writes
    ``rollout_data["advantages"]`` and ``["returns"]``, a float32 tensor per sample of its
    response's length; ``ValueError`` in one line for a sample without its step record.

    Example:
        >>> step = {"t": 0, "reward": 0.0, "obs_key": "o", "state_key": "s", "valid": True,
        ...         "steps": 1, "group": "task-1"}
        >>> data = {"response_lengths": [2, 3], STEPS_KEY: [
        ...     {**step, "member": 0, "action_key": "up", "success": True},
        ...     {**step, "member": 1, "action_key": "down", "success": False}]}
        >>> advantages(None, data, estimator=EstimatorSpec("grpo", {"norm": "mean"}))
        >>> [tensor.tolist() for tensor in data["advantages"]]
        [[5.0, 5.0], [-5.0, -5.0, -5.0]]
    """
    import torch

    lengths = [int(length) for length in rollout_data["response_lengths"]]
    steps = _steps(rollout_data, len(lengths))
    found, _ = row_advantages(
        [step["group"] for step in steps],
        [step["member"] for step in steps],
        steps,
        [False] * len(steps),
        estimator,
        reward=reward,
        success_reward=success_reward,
        advantage_norm=advantage_norm,
    )
    # one tensor for the batch, cut into the samples' views: a tensor made per sample costs
    # more than the estimator itself at 10k samples
    kl = rollout_data.get("kl")
    device = getattr(kl[0], "device", None) if kl else None
    tokens = torch.repeat_interleave(
        torch.as_tensor(found, dtype=torch.float32, device=device),
        torch.as_tensor(lengths, device=device),
    )
    rollout_data["advantages"] = list(tokens.split(lengths))
    rollout_data["returns"] = list(tokens.clone().split(lengths))


def _steps(rollout_data: Mapping[str, Any], samples: int) -> Sequence[Mapping[str, Any]]:
    """Each sample's step record; one line naming what is missing."""
    steps = rollout_data.get(STEPS_KEY)
    if not isinstance(steps, Sequence) or len(steps) != samples:
        given = "none" if steps is None else f"{len(steps) if isinstance(steps, Sequence) else 0}"
        raise ValueError(
            f"slime rollout_data: '{STEPS_KEY}' must hold one step record per sample "
            f"({samples} samples, {given} records); the rollout function writes them"
        )
    for index, step in enumerate(steps):
        member = step.get("member") if isinstance(step, Mapping) else None
        if not isinstance(member, int) or isinstance(member, bool) or "group" not in step:
            raise ValueError(
                f"slime rollout_data: sample {index}'s step record needs 'group' (its task's "
                "group id) and 'member' (its trajectory's number in the group)"
            )
    return steps


def advantage_function(name: str) -> Callable[[Any, MutableMapping[str, Any]], None]:
    """Estimator ``name`` with its defaults as slime's ``fn(args, rollout_data)``."""
    return functools.partial(advantages, estimator=EstimatorSpec(name))


def __getattr__(name: str) -> Any:
    """``agentbench_rl.integrations.slime.<estimator>``: what slime's path loads."""
    if name in available():
        return advantage_function(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
