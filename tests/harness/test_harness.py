"""The seeded evaluation harness: statistics by hand, determinism, workers, resume, CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentbench_rl.agents import load_agent
from agentbench_rl.cli import expand_list_options
from agentbench_rl.harness.config import EvalConfig, RunOptions
from agentbench_rl.harness.evaluate import evaluate
from agentbench_rl.harness.stats import (
    bootstrap_interval,
    summarize,
    t_interval,
    threshold_crossing,
    wilson_interval,
)
from agentbench_rl.spec.records import Evaluation
from agentbench_rl.spec.results_folder import JOURNAL_FILE as JOURNAL

CLI = [sys.executable, "-m", "agentbench_rl.cli"]

SLOW_AGENT = '''
import time, random

class SlowRandom:
    """Random admissible actions, slowly, so a test can kill the run midway."""
    def begin_episode(self, env, seed):
        self.rng = random.Random(seed)
    def act(self, observation, info):
        time.sleep(0.002)
        return self.rng.choice(info["admissible_actions"])
'''


def test_wilson_interval_by_hand() -> None:
    # p = 0.8, n = 10, z = 1.96: centre = (0.8 + 0.19207) / 1.38415 = 0.71680,
    # half = 1.96 * sqrt(0.016 + 0.0096) / 1.38415 = 0.22659.
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.49016, abs=1e-4) and high == pytest.approx(0.94332, abs=1e-4)
    assert wilson_interval(0, 5)[0] == 0.0 and wilson_interval(5, 5)[1] == 1.0


def test_t_interval_by_hand() -> None:
    # mean 0.9, sd 0.1, t(0.975, 2) = 4.302653: half = 4.302653 * 0.1 / sqrt(3) = 0.248414.
    low, high = t_interval([0.8, 0.9, 1.0])
    assert low == pytest.approx(0.9 - 0.248414, abs=1e-6)
    assert high == pytest.approx(0.9 + 0.248414, abs=1e-6)
    with pytest.raises(ValueError):
        t_interval([1.0])


def test_bootstrap_interval_brackets_the_mean_and_is_deterministic() -> None:
    values = [1.0] * 80 + [0.0] * 20
    low, high = bootstrap_interval(values)
    # The normal approximation gives 0.8 +- 1.96 * 0.04 = [0.72, 0.88]; the bootstrap agrees
    # to about a percentage point.
    assert 0.70 <= low <= 0.74 and 0.86 <= high <= 0.90
    assert bootstrap_interval(values) == (low, high)


def test_threshold_crossing() -> None:
    curves = {0: {10: 0.90, 20: 0.95, 30: 0.99}, 1: {10: 0.96}, 2: {10: 0.5, 40: 0.97}}
    result = threshold_crossing(curves, threshold=0.95, budget=30)
    assert result.first_iteration == {"0": 20, "1": 10, "2": None}
    assert result.all_reached is False
    assert threshold_crossing(curves, budget=40).all_reached is True


def test_summarize_by_hand() -> None:
    # Two seeds, two tasks. Seed 0 wins both, seed 1 wins one: per-seed rates 1.0 and 0.5.
    episodes = pd.DataFrame(
        {
            "task_id": ["a", "b", "a", "b"],
            "category": ["x", "y", "x", "y"],
            "seed": [0, 0, 1, 1],
            "success": [True, True, True, False],
            "score": [1.0, 1.0, 1.0, 0.5],
            "steps": [3, 4, 5, 6],
            "return": [1.0, 1.0, 1.0, 0.0],
            "invalid_actions": [0, 1, 0, 1],
        }
    )
    summary = summarize(episodes)
    assert summary["success"]["mean"] == 0.75
    # t(0.975, 1) = 12.7062; sd of (1.0, 0.5) = 0.353553; half = 12.7062 * 0.353553 / sqrt(2)
    # = 3.18: the interval 0.75 +- 3.18 is clipped to what a success rate can be.
    assert summary["success"]["ci95"] == [0.0, 1.0]
    assert summary["success"]["per_seed"]["1"]["mean"] == 0.5
    assert summary["success"]["per_seed"]["1"]["ci95"] == pytest.approx(
        [round(x, 6) for x in wilson_interval(1, 2)]
    )
    assert summary["score"]["mean"] == 0.875
    assert summary["per_category"]["y"]["success"]["mean"] == 0.5
    assert summary["invalid_action_rate"] == pytest.approx(2 / 18)
    assert summary["threshold_95"] == {
        "threshold": 0.95,
        "per_seed": {"0": True, "1": False},
        "all_seeds": False,
    }


def test_expert_eval_wins_everything_and_writes_the_contract(tmp_path: Path) -> None:
    config = EvalConfig(env="sokoban", split="test", agent="expert", seeds=[0, 1], limit=40)
    summary = evaluate(config, tmp_path / "run")
    episodes = pd.read_csv(tmp_path / "run" / "episodes.csv")
    assert list(episodes.columns) == [
        "task_id",
        "category",
        "seed",
        "success",
        "score",
        "steps",
        "return",
        "invalid_actions",
    ]
    assert len(episodes) == 80 and episodes["success"].all()
    # Rows in seed then split order: the --limit sample's tasks as the split lists them.
    sample = config.tasks()
    assert sample == sorted(sample) and list(episodes["task_id"]) == sample * 2
    on_disk = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert Evaluation.of(on_disk) == summary
    for key in (
        "env",
        "split",
        "agent",
        "seeds",
        "n_episodes",
        "split_checksum",
        "success",
        "score",
        "per_seed",
        "per_category",
        "threshold_95",
        "package_version",
        "git_commit",
    ):
        assert key in on_disk or key in on_disk["success"], key
    assert summary.success.mean == 1.0 and summary.threshold_95 is not None
    assert summary.threshold_95.all_seeds and summary.complete_split is False
    assert not (tmp_path / "run" / JOURNAL).exists()


def test_random_agent_eval_is_deterministic_and_worker_independent(tmp_path: Path) -> None:
    config = dict(env="sokoban", split="val", agent="random", seeds=[0, 7], limit=30)
    evaluate(EvalConfig(**config), tmp_path / "a")
    evaluate(EvalConfig(**config), tmp_path / "b")
    evaluate(EvalConfig(**config), tmp_path / "c", RunOptions(workers=2))
    first = (tmp_path / "a" / "episodes.csv").read_bytes()
    assert first == (tmp_path / "b" / "episodes.csv").read_bytes()
    assert first == (tmp_path / "c" / "episodes.csv").read_bytes()
    episodes = pd.read_csv(tmp_path / "a" / "episodes.csv")
    # Seeds differ: the two seeds' random episodes are not the same sequence of outcomes.
    assert not episodes[episodes.seed == 0]["steps"].equals(
        episodes[episodes.seed == 7]["steps"].reset_index(drop=True)
    )


def test_existing_results_need_resume_and_matching_config(tmp_path: Path) -> None:
    config = EvalConfig(env="sokoban", split="test", agent="expert", limit=2)
    evaluate(config, tmp_path / "run")
    with pytest.raises(FileExistsError, match="--resume"):
        evaluate(config, tmp_path / "run")
    other = EvalConfig(env="sokoban", split="test", agent="random", limit=2)
    with pytest.raises(ValueError, match="different agent"):
        evaluate(other, tmp_path / "run", RunOptions(resume=True))
    # Resuming a finished run redoes nothing and rewrites the same bytes.
    before = (tmp_path / "run" / "episodes.csv").read_bytes()
    evaluate(config, tmp_path / "run", RunOptions(resume=True))
    assert (tmp_path / "run" / "episodes.csv").read_bytes() == before


def test_a_resume_may_change_how_results_are_written_not_what_they_are(tmp_path: Path) -> None:
    """Issue 62: the evaluation's identity is what its numbers depend on. A resume that asks
    for another episode format or for trajectories continues; another seed or split is
    refused."""
    pytest.importorskip("pyarrow")
    config = EvalConfig(env="sokoban", split="test", agent="expert", limit=2)
    first = evaluate(config, tmp_path / "run")
    written = config.model_copy(update={"episodes_format": "parquet", "save_trajectories": True})
    again = evaluate(written, tmp_path / "run", RunOptions(resume=True))
    assert again.success == first.success and again.n_episodes == first.n_episodes
    assert (tmp_path / "run" / "episodes.parquet").exists()
    for changed, field in (
        ({"seeds": [1]}, "seeds"),
        ({"env": "sokoban", "split": "val"}, "split"),
    ):
        other = EvalConfig(**{**config.record(), "agent": "expert", **changed})
        with pytest.raises(ValueError, match=f"different {field}"):
            evaluate(other, tmp_path / "run", RunOptions(resume=True))


def _cli_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "slow_agent.py").write_text(SLOW_AGENT)
    return {**os.environ, "PYTHONPATH": str(tmp_path)}


def test_killed_eval_resumes_to_the_same_files(tmp_path: Path) -> None:
    env = _cli_env(tmp_path)
    args = [
        "eval",
        "--env",
        "sokoban",
        "--split",
        "test",
        "--agent",
        "python:slow_agent:SlowRandom",
        "--seeds",
        "0",
        "1",
        "--limit",
        "40",
    ]
    subprocess.run(
        [*CLI, *args, "--out", str(tmp_path / "full")], env=env, check=True, capture_output=True
    )

    run = tmp_path / "killed"
    process = subprocess.Popen(
        [*CLI, *args, "--out", str(run)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    journal = run / JOURNAL
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if journal.exists() and journal.read_text().count("\n") >= 20:
            break
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    done_before = journal.read_text().count("\n")
    assert 20 <= done_before < 80, "the run must be killed midway"
    assert not (run / "episodes.csv").exists()

    subprocess.run(
        [*CLI, *args, "--out", str(run), "--resume"], env=env, check=True, capture_output=True
    )
    for name in ("episodes.csv", "summary.json"):
        assert (run / name).read_bytes() == (tmp_path / "full" / name).read_bytes(), name


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env", "chess"], "unknown env 'chess'"),
        (["--env", "sokoban", "--split", "dev"], "has no split 'dev'"),
        (["--env", "sokoban", "--split", "train"], "unbounded"),
        (["--env", "sokoban", "--agent", "oracle"], "unknown agent 'oracle'"),
        (["--env", "sokoban", "--seeds", "-3"], "seeds.0 must be a whole number >= 0, got -3"),
        (["--env", "sokoban", "--seeds", "1", "1"], "a seed repeats"),
        (["--env", "sokoban", "--agent", "python:no_such_module:f"], "cannot import module"),
        (["--env", "sokoban", "--limit", "0"], "limit must be a whole number >= 1"),
        (["--env", "sokoban", "--frobnicate"], "No such option"),
    ],
)
def test_bad_cli_arguments_exit_with_one_line(
    tmp_path: Path, args: list[str], message: str
) -> None:
    base = {"--agent": "expert", "--out": str(tmp_path / "out")}
    for flag, value in base.items():
        if flag not in args:
            args = [*args, flag, value]
    result = subprocess.run([*CLI, "eval", *args], capture_output=True, text=True, check=False)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.stderr


def test_cli_eval_prints_a_table_and_writes_results(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            *CLI,
            "eval",
            "--env",
            "sokoban",
            "--split",
            "val",
            "--agent",
            "random",
            "--seeds",
            "0",
            "1",
            "2",
            "--limit",
            "20",
            "--out",
            str(tmp_path / "r"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "sokoban / val / random" in result.stdout
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["seeds"] == [0, 1, 2] and summary["n_episodes"] == 60


def test_expand_list_options() -> None:
    assert expand_list_options(["--seeds", "0", "1", "2", "--out", "x"]) == [
        "--seeds",
        "0",
        "--seeds",
        "1",
        "--seeds",
        "2",
        "--out",
        "x",
    ]
    assert expand_list_options(["--seeds", "-1"]) == ["--seeds", "-1"]


def test_user_callable_agent() -> None:
    agent = load_agent("python:agentbench_rl.agents.simple:RandomAgent")
    agent.begin_episode(None, 0)  # type: ignore[arg-type]
    assert agent.act("", {"admissible_actions": ["left"]}) == "left"
    with pytest.raises(ValueError, match="has no 'Nope'"):
        load_agent("python:agentbench_rl.agents.simple:Nope")


def test_env_options_reach_the_env_and_the_results(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            *CLI,
            "eval",
            "--env",
            "sokoban",
            "--agent",
            "expert",
            "--limit",
            "2",
            "--env-option",
            "width=7",
            "--env-option",
            "height=7",
            "--out",
            str(tmp_path / "r"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "results in" in result.stderr
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["config"]["env_kwargs"] == {"width": 7, "height": 7}
    # A 7x7 setting is another set of levels, so another split checksum.
    subprocess.run(
        [
            *CLI,
            "eval",
            "--env",
            "sokoban",
            "--agent",
            "expert",
            "--limit",
            "2",
            "--out",
            str(tmp_path / "s"),
        ],
        capture_output=True,
        check=True,
    )
    standard = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert summary["split_checksum"] != standard["split_checksum"]
    episodes = pd.read_csv(tmp_path / "r" / "episodes.csv")
    assert episodes["success"].all()


def test_parquet_episodes_hold_the_same_rows_as_csv(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    base = dict(env="sokoban", split="val", agent="random", seeds=[0, 1], limit=10)
    evaluate(EvalConfig(**base), tmp_path / "csv")
    evaluate(EvalConfig(**base, episodes_format="parquet"), tmp_path / "pq")
    from_csv = pd.read_csv(tmp_path / "csv" / "episodes.csv")
    from_parquet = pd.read_parquet(tmp_path / "pq" / "episodes.parquet")
    pd.testing.assert_frame_equal(from_csv, from_parquet, check_dtype=False)
    summary_csv = json.loads((tmp_path / "csv" / "summary.json").read_text())
    summary_pq = json.loads((tmp_path / "pq" / "summary.json").read_text())
    assert summary_csv["success"] == summary_pq["success"]


def test_cli_estimators_lists_every_declaration() -> None:
    from agentbench_rl.estimators import REGISTRY

    out = subprocess.run(
        [sys.executable, "-m", "agentbench_rl.cli", "estimators", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    listed = {entry["name"]: entry for entry in json.loads(out.stdout)}
    assert set(listed) == set(REGISTRY)
    for name, declared in REGISTRY.items():
        assert [p["name"] for p in listed[name]["params"]] == list(declared.params)
        assert listed[name]["needs"] == sorted(declared.needs)


@given(
    st.lists(st.lists(st.booleans(), min_size=3, max_size=3), min_size=1, max_size=6),
)
def test_pass_at_k_is_the_share_of_k_subsets_with_a_success(outcomes: list[list[bool]]) -> None:
    """pass@k by its definition, counted over every k-subset of a task's episodes."""
    import itertools

    from agentbench_rl.harness.stats import pass_at_k

    frame = pd.DataFrame(
        [
            {"task_id": f"t{task}", "success": success}
            for task, row in enumerate(outcomes)
            for success in row
        ]
    )
    figures = pass_at_k(frame)
    for k in (1, 2, 3):
        per_task = [
            np.mean([any(subset) for subset in itertools.combinations(row, k)]) for row in outcomes
        ]
        assert figures[str(k)] == pytest.approx(float(np.mean(per_task)), abs=1e-6)


class _NeedsItsModel:
    """An agent class that cannot be built without arguments (a model in memory, say)."""

    def __init__(self, model: object) -> None:
        self.inner = load_agent("expert")

    def begin_episode(self, env: object, seed: int) -> None:
        self.inner.begin_episode(env, seed)  # type: ignore[attr-defined]

    def act(self, observation: object, info: dict[str, object]) -> str:
        return self.inner.act(observation, info)


def test_an_agent_object_plays_though_its_spec_cannot_be_built(tmp_path: Path) -> None:
    config = EvalConfig(env="sokoban", split="test", agent="python:test_harness:_NeedsItsModel",
                        limit=2)  # fmt: skip
    summary = evaluate(config, tmp_path / "run", agent=_NeedsItsModel(object()))
    assert summary.success.mean == 1.0 and summary.agent == config.agent
