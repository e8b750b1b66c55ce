"""The machinery of ``bench estimators`` and ``bench fidelity`` (not timings: those are printed)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from agentbench_rl.bench import estimators as speed
from agentbench_rl.bench import fidelity
from agentbench_rl.core.batch import StepBatch
from agentbench_rl.envs.sokoban.rules import solved
from agentbench_rl.estimators import EstimatorResult, compute, declares, registry
from agentbench_rl.estimators.common import base_diagnostics


# ------------------------------------------------------------------------------ speed bench
def test_synthetic_rollout_shape() -> None:
    rollout = speed.synthetic_rollout(1_030, seed=3)
    batch = rollout.batch()
    assert len(batch) == 1_030
    # 21 trajectories of 50 steps (the last cut to 30), 8 per group -> 3 groups
    assert (batch.n_trajs, batch.n_groups) == (21, 3)
    assert int(batch.t.max()) == 49
    assert len(rollout.latent) == 1_030


def test_synthetic_hidden_clusters_by_latent_state() -> None:
    rollout = speed.synthetic_rollout(400, seed=1)
    hidden = speed.synthetic_hidden(rollout.latent, 256)
    assert hidden.dtype == np.float32
    result = compute("bipace", rollout.batch(hidden))
    # one group: clusters are the visited latent states
    assert result.diagnostics["n_clusters"] == len(np.unique(rollout.latent))


def test_per_row_baseline_equals_gigpo() -> None:
    rollout = speed.synthetic_rollout(2_000, seed=7)
    columns = rollout.columns
    baseline = speed.gigpo_per_row(
        list(columns["group"]),
        list(columns["traj"]),
        list(columns["t"]),
        list(columns["reward"]),
        list(columns["obs_key"]),
    )
    np.testing.assert_allclose(baseline, compute("gigpo", rollout.batch()).advantages, atol=1e-9)


@pytest.mark.slow
def test_speed_bench_quick_run() -> None:
    figures = speed.run(quick=True, console=Console(file=None, quiet=True))
    assert set(figures["estimators"]) >= {"grpo", "gigpo", "bipace (d=3584)"}
    baseline = figures["baseline"][10_000]
    assert baseline["ratio"] > baseline["end_to_end_ratio"] > 0 and baseline["build_s"] > 0
    measured = {t["estimator"]: t["measured_s"] for t in figures["targets"]}
    assert measured["bipace"] > 0 and measured["gigpo"] is None  # 100k rows: full run only
    versus = [t for t in figures["keep_up"] if t["versus"] == "gigpo"]
    assert [t["estimator"] for t in versus] == ["hgpo"] and versus[0]["speed_ratio"] > 0
    # timed in turn with GiGPO, at its default depth and at each shallower one
    assert set(versus[0]["times_s"]) == {"gigpo", "hgpo", "hgpo:0", "hgpo:1"}
    assert min(baseline["write_s"], baseline["from_records_s"]) > 0


def test_the_build_is_timed_on_the_chunks_the_driver_writes() -> None:
    rollout = speed.synthetic_rollout(1_000)
    chunks = speed.driver_chunks(rollout.batch().to_records())
    assert len(chunks) == speed.MAX_STEPS  # one per step: 20 trajectories x 50 steps
    assert all({row["t"] for row in chunk} == {t} for t, chunk in enumerate(chunks))


# ---------------------------------------------------------------------------- fidelity bench
def two_step_mdp(horizon: int) -> fidelity.TabularMDP:
    """States 0 (start), 1, 2, 3 (terminal); actions a0, a1; π uniform.

    0 -a0-> 1 (r 0); 0 -a1-> 2 or 1 with probability 1/2 each (r 0);
    1 -a0-> 3 (r 1); 1 -a1-> 3 (r 0); 2 -any-> 3 (r 0.2).
    """
    successor = np.array([[[1, 1], [2, 1]], [[3, 3], [3, 3]], [[3, 3], [3, 3]], [[3, 3], [3, 3]]])
    probability = np.array(
        [[[1, 0], [0.5, 0.5]], [[1, 0], [1, 0]], [[1, 0], [1, 0]], [[1, 0], [1, 0]]]
    )
    reward = np.array([[[0, 0], [0, 0]], [[1, 0], [0, 0]], [[0.2, 0], [0.2, 0]], [[0, 0], [0, 0]]])
    return fidelity.TabularMDP(
        successor=successor,
        probability=probability,
        reward=reward,
        terminal=np.array([False, False, False, True]),
        policy=np.full((4, 2), 0.5),
        start=0,
        horizon=horizon,
        obs_text=("s0", "s1", "s2", "end"),
        state_text=("s0", "s1", "s2", "end"),
        actions=("a0", "a1"),
        features=np.array([[0], [1], [2], [3]]),
    )


def test_exact_advantages_by_hand() -> None:
    # γ = 0.5. t = 1: Q(1) = (1, 0), V = 1/2 -> A (1/2, -1/2); Q(2) = (0.2, 0.2) -> A 0.
    # t = 0: Q(0, a0) = 0.5·V1(1) = 0.25; Q(0, a1) = 0.5·(0.5·0.2 + 0.5·0.5) = 0.175;
    #        V0(0) = 0.2125 -> A (0.0375, -0.0375).
    advantages = fidelity.exact_advantages(two_step_mdp(horizon=2), 0.5)
    np.testing.assert_allclose(advantages[1, 1], [0.5, -0.5])
    np.testing.assert_allclose(advantages[1, 2], [0.0, 0.0])
    np.testing.assert_allclose(advantages[0, 0], [0.0375, -0.0375])


def test_exact_advantages_stop_at_the_step_limit() -> None:
    # horizon 1: nothing follows the first step, so Q(0, ·) = 0 and A = 0.
    advantages = fidelity.exact_advantages(two_step_mdp(horizon=1), 0.5)
    np.testing.assert_allclose(advantages[0, 0], [0.0, 0.0])


def test_sokoban_mdp_matches_monte_carlo() -> None:
    mdp = fidelity.sokoban_mdp(11)
    np.testing.assert_allclose(mdp.policy.sum(axis=1), 1.0)
    advantages = fidelity.exact_advantages(mdp, 0.95)
    n = 40_000
    rows = fidelity.sample_group(mdp, advantages, n, np.random.default_rng(0))
    returns = np.zeros(n)
    np.add.at(returns, rows["traj"], 0.95 ** rows["t"] * rows["reward"])
    first = rows["t"] == 0
    # Q(a) − Q(up) = A(a) − A(up): the Monte Carlo difference within 4 standard errors
    samples = [returns[rows["traj"][first & (rows["action"] == a)]] for a in range(4)]
    q_hat = np.array([sample.mean() for sample in samples])
    error = np.array([sample.std() / np.sqrt(len(sample)) for sample in samples])
    exact = advantages[0, mdp.start]
    assert np.all(np.abs((q_hat - q_hat[0]) - (exact - exact[0])) <= 4 * np.hypot(error, error[0]))
    assert np.ptp(exact) > 10 * error.max()  # the actions really differ at this precision


def test_sokoban_terminal_states_are_solved_rooms() -> None:
    from agentbench_rl.envs.sokoban.generator import generate_level
    from agentbench_rl.envs.sokoban.rules import parse_grid

    mdp = fidelity.sokoban_mdp(4)
    level = generate_level(4)
    for text, terminal in zip(mdp.obs_text, mdp.terminal, strict=True):
        room, _, boxes = parse_grid(text)
        assert room == level.room
        assert terminal == solved(room, boxes)


def test_aliased_world_hides_two_states_per_text() -> None:
    world = fidelity.aliased_world(3)
    by_text: dict[str, list[int]] = {}
    for state, text in enumerate(world.obs_text):
        by_text.setdefault(text, []).append(state)
    inner = [states for text, states in by_text.items() if text.startswith("Layer")]
    assert all(len(states) == 2 for states in inner)
    for states in inner:  # the agent reads text: aliased states share its policy
        np.testing.assert_array_equal(world.policy[states[0]], world.policy[states[1]])
    assert len(set(world.state_text)) == len(world.state_text)


def test_score_by_hand() -> None:
    truth = np.array([1.0, -1.0, 0.0, 2.0, 0.5])
    estimate = np.array([2.0, -2.0, 1.0, 4.0, -1.0])
    figures = fidelity.score(estimate, truth)
    # rows with A ≠ 0: 0, 1, 3 agree, 4 does not -> 3/4; weighted by |A|: (1 + 1 + 2)/4.5
    assert figures["sign_agreement"] == 0.75
    assert figures["weighted_sign_agreement"] == pytest.approx(4 / 4.5)
    # best scale c = <Â, A>/<Â, Â> = (2 + 2 + 0 + 8 - 0.5)/(4 + 4 + 1 + 16 + 1) = 11.5/26;
    # mean(A²) = (1 + 1 + 0 + 4 + 0.25)/5
    c = 11.5 / 26
    residuals = c * estimate - truth
    assert figures["relative_mse"] == pytest.approx(np.mean(residuals**2) / (6.25 / 5))
    assert figures["correlation"] == pytest.approx(np.corrcoef(estimate, truth)[0, 1])


def test_fidelity_run_writes_table_json_and_plot(tmp_path: Path) -> None:
    payload = fidelity.run(seeds=2, out=tmp_path, console=Console(quiet=True))
    labels = [label for label, _, _ in fidelity.estimator_runs()]
    assert set(payload["results"]) == {"sokoban", "aliased_world"}
    for per_estimator in payload["results"].values():
        assert list(per_estimator) == labels
        for metrics in per_estimator.values():
            assert len(metrics["correlation"]["per_seed"]) == 2
    table = (tmp_path / "fidelity.md").read_text(encoding="utf-8")
    assert table.count("| sokoban |") == len(labels)
    assert table.count("| aliased_world |") == len(labels)
    assert json.loads((tmp_path / "fidelity.json").read_text())["seeds"] == 2
    assert (tmp_path / "fidelity.png").read_bytes()[:4] == b"\x89PNG"

    # BiPACE: ε swept; hidden states follow the true state, not the observation text
    for epsilon in ("0", "0.01", "0.05", "0.1", "0.2"):
        assert any(label.startswith(f"bipace ε={epsilon}") for label in labels)
    world = payload["results"]["aliased_world"]
    # the observation text hides two states: GiGPO's text anchors mix them, BiPACE's clusters
    # of hidden states (a projection of the true state) do not
    assert world["gigpo"]["purity"]["mean"] < 0.9
    assert world["bipace ε=0.05 (default)"]["purity"]["mean"] > 0.95
    assert world["grpo"]["purity"]["mean"] is None  # no step-level sets
    # ε = 0: noisy vectors never coincide, so every row is its own cluster
    assert world["bipace ε=0"]["singleton_rate"]["mean"] == 1.0


class _EntryPoint:
    """What ``importlib.metadata.entry_points`` yields: a name and ``load()``."""

    def __init__(self, name: str, target: Any) -> None:
        self.name, self.target = name, target

    def load(self) -> Any:
        return self.target


def _state_sets(batch: StepBatch, params: Mapping[str, Any]) -> tuple[np.ndarray, int]:
    """One set per true state: pure by construction."""
    return batch.codes("state_key")


@declares(step_sets=_state_sets)
def _by_state(batch: StepBatch) -> EstimatorResult:
    return EstimatorResult(np.zeros(len(batch)), base_diagnostics(batch))


@declares(needs=("semantic_key",))
def _needs_semantics(batch: StepBatch) -> EstimatorResult:
    raise AssertionError("never run: the bench provides no semantic_key")


def test_fidelity_covers_entry_point_estimators_through_their_declarations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    points = [_EntryPoint("by_state", _by_state), _EntryPoint("needs_semantics", _needs_semantics)]
    monkeypatch.setattr(registry, "_entry_points", lambda: points)
    monkeypatch.setattr(registry, "_PLUGINS", {})
    runs = fidelity.estimator_runs()
    assert ("by_state", "by_state", {}) in runs
    assert "needs_semantics" not in {name for _, name, _ in runs}  # its need is not provided
    # purity reads the declared step sets, whatever the name: sets keyed by the true state are
    # pure (1.0); an estimator without step sets has no purity (NaN)
    batch, _ = fidelity.seed_batch(fidelity.aliased_world, "aliased_world", 0)
    assert fidelity.step_set_purity(batch, "by_state", {}) == 1.0
    assert np.isnan(fidelity.step_set_purity(batch, "grpo", {}))
    # the aliased world's observation anchors mix two true states, its state anchors never do
    assert fidelity.step_set_purity(batch, "gigpo", {}) < 1.0
    assert fidelity.step_set_purity(batch, "gigpo", {"anchor": "state"}) == 1.0


def test_every_adapter_gives_the_direct_advantages() -> None:
    """bench estimators --adapters: each trainer's shape of the rows, through its adapter, gives
    what compute gives on the StepBatch (the timing compares like with like)."""
    from agentbench_rl.bench.adapters import ESTIMATOR, adapter_calls, per_row

    rollout = speed.synthetic_rollout(1_000, seed=4)
    direct = compute(ESTIMATOR, rollout.batch()).advantages
    calls = adapter_calls(rollout.batch())
    assert len(calls) == 3
    for name, call in calls.items():
        np.testing.assert_allclose(per_row(call()), direct, rtol=1e-5, atol=1e-6, err_msg=name)
