"""``bench learning``: exact J against Monte Carlo, the PPO gradient against finite differences,
the rows every estimator runs on, determinism, resume and the command's errors."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from agentbench_rl.bench.learning import bench
from agentbench_rl.bench.learning.family import FAMILY
from agentbench_rl.bench.learning.loop import (
    Learner,
    LearningConfig,
    SeedDraws,
    default_estimators,
    play,
    run_job,
    step_batch,
)
from agentbench_rl.bench.learning.mdp import exact_success, optimal_success, softmax
from agentbench_rl.bench.learning.ppo import Rows, clip_gradient
from agentbench_rl.estimators import compute

TINY = LearningConfig(iterations=3, tasks=2, group_size=4)


def random_policy(mdp_name: str, seed: int) -> np.ndarray:
    mdp = FAMILY[mdp_name]()
    logits = np.random.default_rng(seed).normal(0.0, 1.0, size=mdp.initial_logits.shape)
    return softmax(logits)[None]


@pytest.mark.parametrize("mdp_name", list(FAMILY))
def test_exact_success_matches_monte_carlo(mdp_name: str) -> None:
    mdp = FAMILY[mdp_name]()
    policy = random_policy(mdp_name, 7)
    config = LearningConfig(tasks=len(mdp.starts) * 500, group_size=4)
    # every task equally often, as J's mean over tasks assumes
    tasks = np.repeat(np.arange(len(mdp.starts)), 500)
    draws = dataclasses.replace(SeedDraws.draw(mdp, 0, 1, config), tasks=tasks)
    played = play(mdp, policy, [draws], config.group_size)
    wins = np.bincount(played.traj, weights=played.reward) / mdp.success_reward
    exact = exact_success(mdp, policy)[0]
    error = max(wins.std() / np.sqrt(len(wins)), 1e-3)
    assert abs(wins.mean() - exact) <= 4 * error, (wins.mean(), exact, error)
    assert 0.0 <= exact <= optimal_success(mdp) + 1e-12


def test_clip_gradient_matches_finite_differences() -> None:
    rng = np.random.default_rng(0)
    n_seeds, n_contexts, n_actions, n_rows = 2, 3, 4, 40
    logits = rng.normal(size=(n_seeds, n_contexts, n_actions))
    rows = Rows(
        seed=rng.integers(0, n_seeds, n_rows),
        context=rng.integers(0, n_contexts, n_rows),
        action=rng.integers(0, n_actions, n_rows),
        old_logprob=np.log(rng.uniform(0.05, 0.6, n_rows)),  # ratios on both sides of the clip
        minibatch=np.zeros(n_rows, dtype=np.int64),
    )
    advantages = rng.normal(size=n_rows)
    selected = np.arange(n_rows)

    def loss(theta: np.ndarray) -> float:
        # the PPO-clip loss written directly: −min(ρA, clip(ρ)A), mean per seed, summed
        probs = softmax(theta[rows.seed, rows.context])
        ratio = np.exp(np.log(probs[np.arange(n_rows), rows.action]) - rows.old_logprob)
        per_row = -np.minimum(ratio * advantages, np.clip(ratio, 0.8, 1.2) * advantages)
        count = np.bincount(rows.seed, minlength=n_seeds)[rows.seed]
        return float((per_row / count).sum())

    numeric = np.zeros_like(logits)
    step = 1e-6
    for index in np.ndindex(logits.shape):
        up, down = logits.copy(), logits.copy()
        up[index] += step
        down[index] -= step
        numeric[index] = (loss(up) - loss(down)) / (2 * step)
    analytic = clip_gradient(logits, rows, selected, advantages, 0.2)
    np.testing.assert_allclose(analytic, numeric, atol=1e-6)


@pytest.mark.parametrize("label", default_estimators())
def test_every_estimator_runs_on_the_testbed_rows(label: str) -> None:
    result = run_job("history_credit", Learner.parse(label), [0, 1], TINY)
    assert result.curves.shape == (2, TINY.iterations + 1)
    assert np.all((result.curves >= 0) & (result.curves <= 1))
    assert result.curves[0, 0] == result.curves[1, 0]  # the same initial policy


def test_sparse_anchors_rarely_repeat_an_observation() -> None:
    mdp = FAMILY["sparse_anchors"]()
    config = LearningConfig(tasks=4, group_size=8)
    draws = [SeedDraws.draw(mdp, seed, 1, config) for seed in range(4)]
    played = play(mdp, softmax(mdp.initial_logits)[None].repeat(4, axis=0), draws, 8)
    batch = step_batch(mdp, played, 8, config.hidden)
    by_text = compute("gigpo", batch).diagnostics["singleton_rate"]
    by_state = compute("gigpo", batch, anchor="state").diagnostics["singleton_rate"]
    assert by_text > 0.25 and by_state < 0.05  # under the initial policy; more as it learns


def test_seeds_are_independent_and_draws_do_not_depend_on_the_estimator() -> None:
    spec = Learner.parse("gigpo")
    together = run_job("lucky_rare", spec, [0, 1], TINY)
    alone = run_job("lucky_rare", spec, [1], TINY)
    np.testing.assert_allclose(together.curves[1], alone.curves[0], rtol=0, atol=1e-12)
    # common random numbers: the draws are a function of (MDP, seed, iteration) alone, so two
    # estimators whose policies agree play the same rows; policies that differ play others
    mdp = FAMILY["lucky_rare"]()
    draws = [SeedDraws.draw(mdp, 3, 1, TINY)]
    again = [SeedDraws.draw(mdp, 3, 1, TINY)]
    policy = softmax(mdp.initial_logits)[None]
    first = play(mdp, policy, draws, TINY.group_size)
    second = play(mdp, policy, again, TINY.group_size)
    np.testing.assert_array_equal(first.action, second.action)
    np.testing.assert_array_equal(first.reward, second.reward)
    other = play(mdp, np.full_like(policy, 0.5), draws, TINY.group_size)
    same = len(other.action) == len(first.action) and np.array_equal(other.action, first.action)
    assert not same


def test_run_writes_outputs_resumes_and_matches_with_workers(tmp_path: Path) -> None:
    quiet = Console(quiet=True)
    args = (["lucky_rare"], ["grpo", "gigpo", "ecpo"], 3)
    rows = bench.run(*args[:2], args[2], tmp_path / "one", quiet, iterations=3)
    assert [row["estimator"] for row in rows] == ["grpo", "gigpo", "ecpo"]
    assert "final_vs_grpo_p_t" in rows[1] and "auc_vs_gigpo_p_wilcoxon" in rows[2]
    for name in ("learning.md", "learning.csv", "learning.json", "learning.png"):
        assert (tmp_path / "one" / name).exists()
    table = (tmp_path / "one" / "learning.md").read_text(encoding="utf-8")
    assert table.count("| lucky_rare |") == 3

    # resume: a missing job is recomputed, a job made with other settings too, the rest kept
    jobs = sorted((tmp_path / "one" / "jobs").glob("*.json"))
    jobs[0].unlink()
    stored = json.loads(jobs[1].read_text())
    stored["key"]["config"]["iterations"] = 99
    jobs[1].write_text(json.dumps(stored))
    console = Console(record=True, width=200)
    again = bench.run(*args[:2], args[2], tmp_path / "one", console, iterations=3)
    assert "resuming: 1 of 3 jobs done" in console.export_text()
    assert again == rows

    with_workers = bench.run(*args[:2], args[2], tmp_path / "two", quiet, iterations=3, workers=2)
    assert with_workers == rows


def test_estimator_params_are_checked_before_any_work() -> None:
    with pytest.raises(ValueError, match="no selected estimator takes parameter"):
        bench.learners(["grpo"], ["epsilon=0.1"])
    with pytest.raises(ValueError, match="out of range"):
        bench.learners(["gigpo"], ["omega=-1"])
    with pytest.raises(ValueError, match="unknown estimator"):
        bench.learners(["nope"], [])
    specs = bench.learners(["bipace", "gigpo:omega=2"], ["omega=0.5"])
    assert [spec.params for spec in specs] == [{"omega": 0.5}, {"omega": 2}]


def test_command_rejects_an_unknown_mdp_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentbench_rl.cli",
            "bench",
            "learning",
            "--mdp",
            "nope",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "unknown MDP(s) nope" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_table_columns_follow_the_configured_references(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before, the Markdown columns were written out for grpo and gigpo whatever REFERENCES held.
    from agentbench_rl.bench.learning import report

    monkeypatch.setattr(report, "REFERENCES", ("rloo",))
    curves = {"m": {"rloo": np.array([[0.0, 0.5], [0.0, 0.7]]), "x": np.array([[0.0, 0.6]] * 2)}}
    rows = report.summarise(
        curves, {"m": 1.0}, {"m": {"rloo": {"singleton_rate": 0.0}, "x": {"singleton_rate": 0.0}}}
    )
    table = report.markdown_table(rows, "# t")
    header = table.splitlines()[2]
    assert header.endswith("| ΔAUC vs rloo | Δfinal vs rloo | share of oracle's ΔAUC |")
    assert "grpo" not in header
    x_row = table.splitlines()[5]
    assert x_row.count(" [") == 2  # both paired cells filled from the auc/final_vs_rloo keys


def test_the_oracle_trains_on_the_exact_advantage_and_is_offered_only_here() -> None:
    from agentbench_rl.bench.learning.loop import oracle_advantages
    from agentbench_rl.bench.learning.mdp import exact_advantages

    mdp = FAMILY["lucky_rare"]()
    policies = softmax(mdp.initial_logits)[None]
    draws = [SeedDraws.draw(mdp, 0, 1, TINY)]
    played = play(mdp, policies, draws, TINY.group_size)
    advantages = oracle_advantages(mdp, policies, played)
    # Q − V at the first step, by hand from the table: its policy-weighted mean is 0, and the
    # played rows read exactly the table's cells.
    table = exact_advantages(mdp, policies)
    rows = np.flatnonzero(played.t == 0)
    expected = table[0, 0, played.state[rows], played.action[rows]]
    np.testing.assert_array_equal(advantages[rows], expected)
    weighted = policies[0][mdp.context[played.state[rows]]] * table[0, 0, played.state[rows]]
    np.testing.assert_allclose(weighted.sum(axis=1), 0.0, atol=1e-12)
    with pytest.raises(ValueError, match="unknown estimator"):
        compute("oracle", step_batch(mdp, played, TINY.group_size, TINY.hidden))
    with pytest.raises(ValueError, match="oracle: unknown parameter"):
        bench.learners(["oracle:omega=1"], [])


def test_recent_cue_separates_the_cues_by_recent_observations_only() -> None:
    # The MDP of HGPO's claim: at the door, the observation pools both cues (GiGPO's anchor
    # set is impure), the last three observations never do (HGPO's deepest level is pure).
    from agentbench_rl.estimators.common import anchor_sets
    from agentbench_rl.estimators.hgpo import context_levels

    mdp = FAMILY["recent_cue"]()
    config = LearningConfig(tasks=4, group_size=8)
    draws = [SeedDraws.draw(mdp, 0, 1, config)]
    played = play(mdp, softmax(mdp.initial_logits)[None], draws, 8)
    batch = step_batch(mdp, played, 8, config.hidden)
    door = played.t == 3  # start, cue, hallway, door: every trajectory is at the door at t = 3
    drawn = len(set(draws[0].tasks.tolist()))
    assert door.sum() == 32 and len(set(played.state[door])) == 2 * drawn  # both cues seen
    anchors, _ = anchor_sets(batch, "obs")
    assert any(len(set(played.state[anchors == code])) == 2 for code in set(anchors[door]))
    deepest = context_levels(batch, anchor_sets(batch, "obs"), 2)[-1]
    codes = deepest.row_codes(len(batch))[:-1]
    for code in np.unique(codes[door & (codes >= 0)]):
        assert len(set(played.state[codes == code])) == 1
    assert (codes[door] >= 0).mean() > 0.9  # nearly every door row is in a level-3 group
