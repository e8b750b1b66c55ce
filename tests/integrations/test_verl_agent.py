"""The verl-agent drop-in (#44.3): every estimator behind verl-agent's advantage signature equals
our StepBatch path on the same rows, and GiGPO's equals verl-agent's own function (when a
checkout is named; see tests/estimators/test_peer_estimators.py for how)."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest

from agentbench_rl.bench.peers import (
    CHECKED_AT,
    GIGPO_FILE,
    ROOT_VARIABLE,
    load_function,
    peer_root,
)
from agentbench_rl.estimators import REGISTRY, StepBatch, compute
from agentbench_rl.estimators.common import episode_scores, step_returns

torch = pytest.importorskip("torch")
from agentbench_rl.integrations import token_rows, verl_agent  # noqa: E402

TOKENS = 3


def random_batch(seed: int, hidden: bool = False) -> StepBatch:
    """Groups of trajectories over a few observations, rewards on any step, some lone rows."""
    rng = np.random.default_rng(seed)
    records = []
    for group in range(4):
        for member in range(int(rng.integers(1, 5))):
            length = int(rng.integers(1, 7))
            observations = [str(rng.choice(list("ABCD"))) for _ in range(length + 1)]
            for t in range(length):
                records.append(
                    {"group": f"g{group}", "traj": f"g{group}/{member}", "t": t,
                     "reward": float(rng.choice([0.0, 0.0, 1.0, 0.5, 2.0])),
                     "obs_key": observations[t], "state_key": observations[t],
                     "action_key": str(rng.choice(["up", "down"])), "valid": True,
                     "next_obs_key": observations[t + 1]}
                )  # fmt: skip
    batch = StepBatch.from_records(records)
    if hidden:
        from dataclasses import replace

        batch = replace(batch, hidden=rng.normal(size=(len(batch), 8)).astype(np.float32))
    return batch


def inputs(batch: StepBatch, gamma: float) -> tuple[np.ndarray, tuple[Any, ...]]:
    """verl-agent's arguments for ``batch`` in step-major row order, and that order."""
    order = np.lexsort((batch.traj_codes, batch.t))
    rewards = np.zeros((len(batch), TOKENS))
    rewards[:, -1] = episode_scores(batch, 0.0)[order]
    return order, (
        torch.tensor(rewards),
        torch.tensor(step_returns(batch, gamma, 0.0)[order]),
        torch.ones((len(batch), TOKENS), dtype=torch.float64),
        np.asarray(batch.obs_key[order], dtype=object),
        np.asarray(batch.group[order], dtype=object),
        np.asarray(batch.traj[order], dtype=object),
    )


@pytest.mark.parametrize("name", list(REGISTRY))
@pytest.mark.parametrize("mode", ["mean_norm", "mean_std_norm"])
def test_every_estimator_behind_verl_agents_signature_equals_the_step_batch_path(
    name: str, mode: str
) -> None:
    gamma = REGISTRY[name].defaults.get("gamma", 0.95)
    for seed in range(4):
        batch = random_batch(zlib.crc32(f"{name}/{mode}/{seed}".encode()), hidden=name == "bipace")
        order, args = inputs(batch, gamma)
        extra: dict[str, Any] = {"actions": batch.action_key[order]}
        if name == "bipace":
            extra["hidden"] = batch.hidden[order]
        function = getattr(verl_agent, f"compute_{name}_outcome_advantage")
        advantages, returns = function(*args, mode=mode, **extra)
        assert advantages.shape == (len(batch), TOKENS) and returns is advantages
        params: dict[str, Any] = {}
        if "norm" in REGISTRY[name].params:
            params["norm"] = verl_agent.MODES[mode]
        if "lone_row" in REGISTRY[name].params:
            params["lone_row"] = "score"
        # the drop-in's own batch: the same rows, ids joined, the last step's next node its own
        ours = compute(name, token_rows.step_batch_of(*args[:2], *args[3:], gamma=gamma,
                                                      **extra), **params).advantages  # fmt: skip
        np.testing.assert_allclose(advantages[:, 0].numpy(), ours, rtol=0, atol=1e-10)
        if name not in ("graphgpo",):  # its last-step node differs: the batch's own next key
            direct = compute(name, batch, **params).advantages[order]
            np.testing.assert_allclose(advantages[:, -1].numpy(), direct, rtol=0, atol=1e-10)


def test_gigpo_behind_the_signature_equals_verl_agents_own() -> None:
    root = peer_root()
    if root is None or not (root / GIGPO_FILE).is_file():
        pytest.skip(f"set {ROOT_VARIABLE} to a verl-agent checkout ({CHECKED_AT[GIGPO_FILE]})")
    theirs_function = load_function(root, GIGPO_FILE, "compute_gigpo_outcome_advantage")
    for seed in range(10):
        batch = random_batch(seed)
        _, args = inputs(batch, 0.95)
        for mode in ("mean_norm", "mean_std_norm"):
            default = torch.get_default_dtype()
            torch.set_default_dtype(torch.float64)
            try:
                theirs, _ = theirs_function(*args, epsilon=1e-6, step_advantage_w=0.7, mode=mode)
            finally:
                torch.set_default_dtype(default)
            ours, _ = verl_agent.compute_gigpo_outcome_advantage(
                *args, step_advantage_w=0.7, mode=mode
            )
            np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=0, atol=1e-8)


def test_a_wrong_gamma_and_unsupported_options_are_one_line() -> None:
    batch = random_batch(1)
    _, args = inputs(batch, 0.9)  # step returns made with 0.9; gigpo's default is 0.95
    rewarded = bool(np.any(batch.reward[batch.t > 0] != 0))
    if rewarded:
        with pytest.raises(ValueError, match="give the estimator the gamma"):
            verl_agent.compute_gigpo_outcome_advantage(*args)
    verl_agent.compute_gigpo_outcome_advantage(*args, gamma=0.9)
    with pytest.raises(ValueError, match="enable_similarity is not offered"):
        verl_agent.compute_gigpo_outcome_advantage(*args, gamma=0.9, enable_similarity=True)
    with pytest.raises(ValueError, match="grpo has no step weight"):
        verl_agent.compute_grpo_outcome_advantage(*args, step_advantage_w=0.5)
