"""Properties every estimator must have, checked on random batches (hypothesis)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_estimators_reference import random_records

from agentbench_rl.estimators import REGISTRY, StepBatch, compute

Row = dict[str, Any]
OBSERVATIONS = "ABCD"


def one_hot_hidden(records: list[Row]) -> list[Row]:
    """Give every row the one-hot vector of its observation: BiPACE's clusters are then exactly
    the anchor sets, whatever the row order."""
    for row in records:
        row["hidden"] = [float(row["obs_key"] == obs) for obs in OBSERVATIONS]
    return records


def advantages(name: str, batch: StepBatch, **params: Any) -> np.ndarray:
    return compute(name, batch, **params).advantages


#: Every registered estimator (the built-ins and anything registered before collection, such as
#: the toy estimator of tests/test_contributing.py): the shared properties below cover each.
REGISTERED = tuple(REGISTRY)


@pytest.mark.parametrize("name", REGISTERED)
@settings(max_examples=12, deadline=None)
@given(records=random_records(), random=st.randoms(use_true_random=False))
def test_permuting_the_rows_permutes_the_advantages(
    name: str, records: list[Row], random: Any
) -> None:
    batch = StepBatch.from_records(one_hot_hidden(records))
    permutation = list(range(len(batch)))
    random.shuffle(permutation)
    original = advantages(name, batch)
    permuted = advantages(name, batch.take(permutation))
    # Row order changes only rounding: of sums (1e-16 relative) and of the graph estimators'
    # linear solves, both amplified where a set's spread is ~0 by the std floor (1e-6): CRBC
    # gave 2.2e-9 on a hypothesis draw where exact arithmetic gives 0 (a rounding, not an order)
    np.testing.assert_allclose(permuted, original[permutation], rtol=1e-9, atol=1e-7)


@settings(max_examples=40, deadline=None)
@given(
    random_records(),
    st.sampled_from(["mean_std", "mean"]),
    st.sampled_from(["rows", "trajectories"]),
    st.sampled_from(["obs", "state"]),
)
def test_gigpo_with_distinct_anchors_is_grpo(
    records: list[Row], norm: str, stats: str, anchor: str
) -> None:
    for index, row in enumerate(records):
        row["obs_key"] = row["state_key"] = f"unique-{index}"
    batch = StepBatch.from_records(records)
    np.testing.assert_array_equal(
        advantages("gigpo", batch, norm=norm, episode_stats=stats, anchor=anchor),
        advantages("grpo", batch, norm=norm, episode_stats=stats),
    )


@settings(max_examples=40, deadline=None)
@given(random_records(), st.sampled_from(["mean_std", "mean"]), st.sampled_from([0.0, 0.5, 0.95]))
def test_bipace_state_pace_on_one_hot_hidden_is_gigpo(
    records: list[Row], norm: str, gamma: float
) -> None:
    batch = StepBatch.from_records(one_hot_hidden(records))
    np.testing.assert_allclose(
        advantages("bipace", batch, pace="state", norm=norm, gamma=gamma),
        advantages("gigpo", batch, norm=norm, gamma=gamma),
        rtol=1e-12,
        atol=1e-12,
    )


@settings(max_examples=40, deadline=None)
@given(
    random_records(),
    st.sampled_from(["mean_std", "mean"]),
    st.sampled_from(["rows", "trajectories"]),
)
def test_ecpo_with_a_huge_kappa_is_grpo(records: list[Row], norm: str, stats: str) -> None:
    # The step term is at most n·|Ḡ_u − μ_s| / (κ·(σ_s + 1e-6)): about 1e-8 at κ = 1e12.
    batch = StepBatch.from_records(records)
    np.testing.assert_allclose(
        advantages("ecpo", batch, kappa=1e12, norm=norm, episode_stats=stats),
        advantages("grpo", batch, norm=norm, episode_stats=stats),
        rtol=0,
        atol=1e-7,
    )


@settings(max_examples=40, deadline=None)
@given(
    random_records(),
    st.sampled_from(["mean_std", "mean"]),
    st.sampled_from(["additive", "replace"]),
    st.booleans(),
)
def test_gated_bepo_without_branching_states_is_grpo(
    records: list[Row], norm: str, mixing: str, one_path: bool
) -> None:
    if one_path:
        # Cut every trajectory of a group to the group's shortest length and name the state by
        # t: state t is left only towards state t + 1 (or ⊥ after the last step).
        length: dict[str, int] = {}
        for row in records:
            length[row["traj"]] = max(length.get(row["traj"], 0), row["t"] + 1)
        shortest: dict[str, int] = {}
        for row in records:
            shortest[row["group"]] = min(shortest.get(row["group"], 99), length[row["traj"]])
        records = [row for row in records if row["t"] < shortest[row["group"]]]
        for row in records:
            row["state_key"] = f"{row['group']}-step-{row['t']}"
    else:
        for index, row in enumerate(records):
            row["state_key"] = f"unique-{index}"
    batch = StepBatch.from_records(records)
    result = compute("gated_bepo", batch, norm=norm, mixing=mixing)
    assert result.diagnostics["gate_rate"] == 0.0
    np.testing.assert_array_equal(result.advantages, advantages("grpo", batch, norm=norm))


@settings(max_examples=40, deadline=None)
@given(
    random_records(),
    st.sampled_from(["grpo", "rloo", "gigpo", "bipace", "gated_bepo"]),
    st.sampled_from([0.001, 0.5, 3.0, 1000.0]),
    st.sampled_from([0.0, 0.5]),
)
def test_scaling_rewards_scales_mean_normalised_advantages(
    records: list[Row], name: str, c: float, p: float
) -> None:
    # ECPO's gate (1e-6 in B/(B + W + 1e-6)) and ProGPO's transition credit (divided by the
    # std of C whatever norm is, weights m/(v + 0.01)) are not scale-equivariant by design.
    params: dict[str, Any] = {} if name == "rloo" else {"norm": "mean"}
    batch = StepBatch.from_records(one_hot_hidden(records))
    scaled_records = [dict(row, reward=row["reward"] * c) for row in one_hot_hidden(records)]
    scaled = StepBatch.from_records(scaled_records)
    np.testing.assert_allclose(
        advantages(name, scaled, invalid_penalty=c * p, **params),
        c * advantages(name, batch, invalid_penalty=p, **params),
        rtol=1e-9,
        atol=1e-9 * c,
    )


@pytest.mark.parametrize("name", REGISTERED)
@settings(max_examples=6, deadline=None)
@given(records=random_records(hidden_size=16))
def test_same_batch_same_advantages_bitwise(name: str, records: list[Row]) -> None:
    first = compute(name, StepBatch.from_records(records))
    again = compute(name, StepBatch.from_records(records))
    assert first.advantages.tobytes() == again.advantages.tobytes()
    assert first.diagnostics == again.diagnostics
    for key in ("n_rows", "n_groups", "step_groups", "singleton_rate", "mean_group_size"):
        assert key in first.diagnostics


@settings(max_examples=15, deadline=None)
@given(records=random_records(max_trajs=6, max_len=8, observations="ABCDEFG"))
def test_the_dense_and_the_sparse_graph_solves_agree(records: list[Row]) -> None:
    # solve_graph takes small connected parts of a graph as a batch of dense systems and the
    # rest as one sparse system: forced all one way, then all the other, the values agree.
    from agentbench_rl.estimators import common

    batch = StepBatch.from_records(records)
    names = ("gated_bepo", "crbc", "graphhca", "graft")
    dense = {name: advantages(name, batch) for name in names}
    saved = common.DENSE_NODES
    common.DENSE_NODES = 0
    try:
        for name in names:
            # to 1e-8: the two solves round differently, and a value's ulp divided by a
            # zero std's 1e-6 (an anchor whose Q and V are equal) is ~1e-9
            np.testing.assert_allclose(advantages(name, batch), dense[name], rtol=1e-9, atol=1e-8)
    finally:
        common.DENSE_NODES = saved
