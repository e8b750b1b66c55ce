"""Every estimator of this package in SkyRL's advantage registry (``skyrl-train``).

SkyRL picks its advantage estimator by name (``trainer.algorithm.advantage_estimator``) from
``AdvantageEstimatorRegistry``, whose functions take ``(token_level_rewards, response_mask,
index, **kwargs)`` and return ``(advantages, returns)`` per token; its dispatch,
``ppo_utils.compute_advantages_and_returns``, passes its own ``values``, ``gamma``, ``lambd``,
``grpo_norm_by_std`` and ``config`` (the algorithm section) and any other keyword through.
:func:`register` adds each of our estimators there as ``agentbench_<name>``
(``agentbench_gigpo``, ...; SkyRL's own ``grpo`` and ``rloo`` keep their names), computed on
the :class:`~agentbench_rl.core.batch.StepBatch` the rows describe
(:func:`~agentbench_rl.integrations.token_rows.step_batch_of`):

- with the per-step keys as keywords (one row per env step: ``traj_index``, ``anchor_obs``,
  ``step_rewards``, and optionally ``actions``, ``valid``, ``hidden``; what verl-agent's rows
  carry, :mod:`.verl_agent`), each row gets its step's credit;
- without them (SkyRL's default rows: one whole response per row), each row is a one-step
  trajectory anchored on its prompt group: a step term then repeats the episode term (GiGPO
  gives twice GRPO's advantage), so step-level credit adds nothing there but a scale.

SkyRL's ``gamma`` and ``lambd`` are its GAE's and are not read; our estimator's parameters
come from ``config.agentbench`` (a mapping in the algorithm section, ``gamma``, ``omega``,
``anchor``, ..., of which each estimator takes those it declares) or as keywords (checked).
SkyRL's step-wise mode (``generator.step_wise_trajectories``) calls the estimator on each
trajectory's last step only and spreads that advantage over the trajectory's steps, so step
credit there needs the dispatch called on every step row with its keys (docs/integrations.md
shows the override).

Two lines in a SkyRL entry point::

    from agentbench_rl.integrations.skyrl import register
    register()  # then trainer.algorithm.advantage_estimator=agentbench_gigpo
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from agentbench_rl.estimators import available, resolve
from agentbench_rl.integrations.token_rows import as_numpy, row_advantages, token_advantages

PREFIX = "agentbench_"
#: What SkyRL's dispatch passes to every estimator (read by its own GAE, GRPO and RLOO).
SKYRL_KEYWORDS = frozenset({"values", "gamma", "lambd", "grpo_norm_by_std", "epsilon"})


def skyrl_estimator(name: str) -> Callable[..., tuple[Any, Any]]:
    """Our estimator ``name`` with SkyRL's advantage signature (module docstring)."""
    declared = resolve(name)

    def estimator(
        token_level_rewards: Any,
        response_mask: Any,
        index: Any,
        *,
        traj_index: Any = None,
        anchor_obs: Any = None,
        step_rewards: Any = None,
        actions: Any = None,
        valid: Any = None,
        hidden: Any = None,
        config: Any = None,
        **keywords: Any,
    ) -> tuple[Any, Any]:
        params = {k: v for k, v in keywords.items() if k not in SKYRL_KEYWORDS}
        from_config = config.get("agentbench") if config is not None else None
        if from_config is not None:  # a dict or OmegaConf's DictConfig, for every estimator:
            shared = {str(k): v for k, v in from_config.items() if str(k) in declared.params}
            params = {**shared, **params}  # each takes what it declares
        rows = len(index)
        if traj_index is None:  # one response per row: a one-step trajectory on its prompt
            scores = np.asarray(as_numpy(token_level_rewards), dtype=np.float64).sum(axis=-1)
            traj_index, anchor_obs, step_rewards = np.arange(rows), list(index), scores
        elif anchor_obs is None or step_rewards is None:
            raise ValueError(
                f"{PREFIX}{name}: traj_index needs anchor_obs and step_rewards beside it"
            )
        advantages = row_advantages(
            name,
            params,
            token_level_rewards,
            step_rewards,
            anchor_obs,
            index,
            traj_index,
            actions=actions,
            valid=valid,
            hidden=hidden,
        )
        scores = token_advantages(advantages, response_mask)
        return scores, scores

    estimator.__name__ = estimator.__qualname__ = f"{PREFIX}{name}"
    estimator.__doc__ = f"Our ``{name}`` with SkyRL's advantage signature (module docstring)."
    return estimator


def register(names: list[str] | None = None) -> list[str]:
    """Add ``names`` (default: every estimator of our registry, entry points included) to
    SkyRL's ``AdvantageEstimatorRegistry`` as ``agentbench_<name>``; a name registered already
    is left as it is (calling twice is harmless). Returns the names SkyRL now resolves."""
    from skyrl_train.utils.ppo_utils import AdvantageEstimatorRegistry

    registered = []
    for name in names or available():
        key = f"{PREFIX}{name}"
        if key not in AdvantageEstimatorRegistry._functions:  # its own table, no lookup API
            AdvantageEstimatorRegistry.register(key, skyrl_estimator(name))
        registered.append(key)
    return registered
