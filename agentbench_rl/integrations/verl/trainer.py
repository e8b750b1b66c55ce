"""verl's v1 sync trainer with our advantage step (needs the ``verl`` extra).

Why a subclass: an estimator registered with verl's ``register_adv_est`` never sees step keys.
verl's ``compute_advantage`` passes a registered estimator only ``token_level_rewards``,
``response_mask``, ``config`` and the group ``index`` (non-tensor fields reach only its built-in
``gdpo``), so GiGPO's anchor states, the invalid-action flags or the step index cannot get
there. :class:`AgentBenchTrainer` replaces the trainer's ``_compute_advantage``: it reads each
row's step record from verl's storage (TransferQueue), runs ``estimators.compute`` on the rows
(``advantages.py``) and writes the row's advantage on every token of its response, as the home
trainer does.

It registers as nothing: it is verl's ``"sync"`` trainer class (``PPOTrainerSync``) with one
method replaced, and the config keeps ``trainer.v1.trainer_mode=sync`` (verl compares that
string literally: any other name would pick the asynchronous replay buffer). The estimator name
``agentbench`` in ``algorithm.adv_estimator`` is registered with verl so that verl's own
advantage path, if it were ever reached, fails loudly instead of computing something else.

BiPACE (not built; ``--engine verl`` rejects it): it needs, per step row, the actor's residual
stream at layer ``-hidden_layer`` on the last prompt token. verl's rollout servers return token
ids and log-probs only, and the actor worker (``verl.workers.engine_workers.
ActorRolloutRefWorker``) has no method that returns hidden states: its ``compute_log_prob``
runs the engine's ``infer_batch``, whose forward step keeps log-probs and entropy. The route is
an extra forward: a worker subclass with one more ``@register(dispatch_mode=
make_nd_compute_dataproto_dispatch_fn(mesh_name="actor"))`` method that runs the FSDP module on
the prompts with ``output_hidden_states=True`` and returns that one vector per row, mapped in by
overriding the trainer's ``_init_resource_pool_mgr``, and called from ``_step_once`` before the
advantage step, which would pass the vectors to ``StepBatch(hidden=...)``. It needs a GPU to
build and check (FSDP), which this round did not have.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import transfer_queue as tq
from omegaconf import DictConfig
from tensordict import TensorDict
from transfer_queue import KVBatchMeta
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from agentbench_rl.integrations.verl.advantages import RECORD_KEY, row_advantages
from agentbench_rl.integrations.verl.config import (
    ADV_ESTIMATOR,
    check_supported,
    read_agent_loop_config,
)
from agentbench_rl.train.config import TrainConfig


def _not_through_verl(**_: Any) -> Any:
    """Stands for our estimators in verl's registry; computing through it is a mistake."""
    raise RuntimeError(
        f"algorithm.adv_estimator={ADV_ESTIMATOR} is computed by AgentBenchTrainer "
        "(agentbench_rl.integrations.verl.trainer); launch with agentbench-rl train --engine verl"
    )


if ADV_ESTIMATOR not in ADV_ESTIMATOR_REGISTRY:
    register_adv_est(ADV_ESTIMATOR)(_not_through_verl)


def nested_constant(values: np.ndarray, lengths: torch.Tensor) -> torch.Tensor:
    """A jagged tensor whose row i is ``values[i]`` repeated ``lengths[i]`` times.

    Example:
        >>> rows = nested_constant(np.array([1.5, -2.0]), torch.tensor([2, 1]))
        >>> [row.tolist() for row in rows.unbind()]
        [[1.5, 1.5], [-2.0]]
    """
    return torch.nested.as_nested_tensor(
        [
            torch.full((int(n),), float(v), dtype=torch.float32)
            for v, n in zip(values, lengths, strict=True)
        ],
        layout=torch.jagged,
    )


class AgentBenchTrainer(PPOTrainerSync):
    """verl's sync PPO trainer; advantages come from our estimators (module docstring)."""

    def __init__(self, config: DictConfig) -> None:
        super().__init__(config)
        path = config.actor_rollout_ref.rollout.agent.agent_loop_config_path
        self.train_config: TrainConfig = read_agent_loop_config(path)
        check_supported(config)

    def _compute_advantage(self, batch: KVBatchMeta, metrics: dict[str, Any]) -> KVBatchMeta:
        """Our estimator's advantage on every response token of every row (padding: 0)."""
        data = tq.kv_batch_get(
            keys=batch.keys,
            partition_id=batch.partition_id,
            select_fields=["uid", "session_id", "extra_fields", "response_mask"],
        )
        extras = list(data["extra_fields"])
        records = [extra.get(RECORD_KEY) if isinstance(extra, dict) else None for extra in extras]
        padding = [bool(tag.get("is_padding", False)) for tag in batch.tags]
        config = self.train_config
        advantages, result = row_advantages(
            list(data["uid"]),
            [int(session) for session in data["session_id"]],
            records,
            padding,
            config.estimator_spec(),
            reward=config.reward,
            success_reward=config.success_reward,
            advantage_norm=config.advantage_norm,
        )
        lengths = data["response_mask"].offsets().diff()
        values = nested_constant(advantages, lengths)
        fields = TensorDict(
            {"advantages": values, "returns": values.clone()}, batch_size=len(batch)
        )
        real = advantages[~np.asarray(padding)]
        metrics.update(
            {
                "agentbench/adv_mean": float(real.mean()),
                "agentbench/adv_std": float(real.std()),
                "agentbench/rows": float(real.size),
                **{
                    f"agentbench/est/{key}": float(value)
                    for key, value in result.diagnostics.items()
                    if isinstance(value, int | float)
                },
            }
        )
        return tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=fields)
