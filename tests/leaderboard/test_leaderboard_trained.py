"""Trained here: the ``training_run`` metadata, its check against the played weights, the boards'
"Trained here" section, and ``leaderboard file-runs`` on a tiny sweep trained on the spot.

The submissions of the board tests are real harness runs of the random agent on the 200 Sokoban
val levels, one per seed, dressed as trained runs; expected figures are computed here by hand.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from submission_helpers import copy_of, episodes_of, read_json, rejection, write_json
from test_train_cli import TINY

from agentbench_rl.harness.config import EvalConfig
from agentbench_rl.harness.evaluate import evaluate
from agentbench_rl.leaderboard.render import render
from agentbench_rl.leaderboard.store import stored_submissions, submit
from agentbench_rl.leaderboard.validate import validate_submission

WEIGHTS = "0123456789abcdef"


def metadata(seed: int, estimator: str | None = None, weights: str = WEIGHTS) -> dict[str, Any]:
    """A submission's metadata; trained (with a training_run) when ``estimator`` is given."""
    base: dict[str, Any] = {
        "name": f"random seed {seed}" if estimator is None else f"tiny {estimator} seed {seed}",
        "estimator": estimator,
        "training": None if estimator is None else {"iterations": 40, "rollouts": 3840},
        "parameters": None if estimator is None else 1_000_000,
        "seeds": [seed],
        "code_version": "test",
        "contact": "tests",
        "url": None,
    }
    if estimator is not None:
        base["training_run"] = {
            "sweep": "baselines/sokoban-tiny-cpu-campaign.yaml",
            "overrides": [],
            "cell": f"sokoban-tiny-cpu-campaign-{estimator}",
            "seed": seed,
            "config_sha256": "ab" * 32,
            "iterations": 40,
            "weights": weights,
            "git_commit": "c0ffee" * 6 + "c0ff",
            "git_dirty": seed == 1,
            "val_success": 0.5,
            "val_success_harness": 0.5,
        }
    return base


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """Random-agent results on sokoban/val, one folder per seed 0 to 3 (never modified)."""
    scratch = tmp_path_factory.mktemp("trained")
    folders = {}
    for seed in (0, 1, 2, 3):
        folder = scratch / f"seed{seed}"
        evaluate(EvalConfig(env="sokoban", split="val", agent="random", seeds=[seed]), folder)
        folders[seed] = folder
    return folders


def dressed(run: Path, target: Path, meta: dict[str, Any], played: str | None = WEIGHTS) -> Path:
    """A copy of ``run`` with ``meta`` and the played weights recorded as ``played``."""
    folder = copy_of(run, target)
    write_json(folder / "metadata.json", meta)
    summary = read_json(folder / "summary.json")
    summary["provenance"]["agent_weights"] = played
    write_json(folder / "summary.json", summary)
    return folder


def test_a_training_run_must_name_the_weights_that_were_played(
    runs: dict[int, Path], tmp_path: Path
) -> None:
    good = dressed(runs[0], tmp_path / "good", metadata(0, "gigpo"))
    assert validate_submission(good).metadata.training_run is not None
    other = dressed(runs[0], tmp_path / "other", metadata(0, "gigpo"), played="fedcba9876543210")
    assert rejection(other) == (
        "metadata.json: training_run.weights 0123456789abcdef differ from the weights the "
        'episodes were played with ("fedcba9876543210")'
    )
    unknown = dressed(runs[0], tmp_path / "unknown", metadata(0, "gigpo"), played=None)
    assert "records no weights fingerprint" in rejection(unknown)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"estimator": None}, "a training_run needs the estimator and the training budget"),
        ({"training": None}, "a training_run needs the estimator and the training budget"),
        ({"training_run": {"weights": "XYZ"}}, "field 'training_run.weights'"),
        ({"training_run": {"val_success": 1.5}}, "field 'training_run.val_success'"),
        ({"training_run": {"extra": 1}}, "unknown field 'training_run.extra'"),
    ],
)
def test_training_run_metadata_is_checked(
    runs: dict[int, Path], tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    meta = metadata(0, "gigpo")
    for key, value in change.items():
        if key == "training_run":
            meta["training_run"] = {**meta["training_run"], **value}
        else:
            meta[key] = value
    assert message in rejection(dressed(runs[0], tmp_path / "s", meta))


def success_by_hand(folder: Path) -> float:
    episodes = episodes_of(folder)
    return float(episodes["success"].sum()) / len(episodes)


def test_the_board_shows_runs_trained_here_in_their_own_section(
    runs: dict[int, Path], tmp_path: Path
) -> None:
    root = tmp_path / "boards"
    # The reference row plays its own episodes: the same episodes are filed once.
    submit(dressed(runs[3], tmp_path / "reference", metadata(3)), root)
    trained = {("gigpo", 0): 0, ("gigpo", 1): 1, ("grpo", 2): 2}
    for (estimator, seed), source in trained.items():
        folder = dressed(runs[source], tmp_path / f"{estimator}{seed}", metadata(seed, estimator))
        write_json(folder / "curves.json", {str(seed): {"20": 0.4, "40": 0.5}})
        submit(folder, root)
    render(root)
    markdown = (root / "README.md").read_text("utf-8")
    main = markdown.split("### sokoban / val\n", 1)[1].split("###", 1)[0]
    assert "random seed 3" in main and "tiny gigpo" not in main
    section = markdown.split("### sokoban / val: trained here\n", 1)[1]
    tables = [block for block in section.split("\n\n") if block.startswith("|")]
    summary = [line.strip("|").split(" | ") for line in tables[0].splitlines()[2:]]
    rows = [line.strip("|").split(" | ") for line in tables[1].splitlines()[2:]]
    # Per run: by estimator, then seed; the dirty tree is said; val shows trainer / harness;
    # the weights come before what was verified and the claimed commit.
    assert [(row[1], row[2]) for row in rows] == [("gigpo", "0"), ("gigpo", "1"), ("grpo", "2")]
    assert rows[1][-1].strip() == "c0ffeec0ffee (dirty)" and rows[0][-1].strip() == "c0ffeec0ffee"
    assert rows[0][-3] == WEIGHTS and "50.0 / 50.0" in rows[0]
    # Per estimator: the mean of its runs' success; for two values a, b the 95% t-interval is
    # mean ± t(0.975, 1) * |a - b| / 2 with t(0.975, 1) = 12.7062 (tables).
    a, b = success_by_hand(runs[0]), success_by_hand(runs[1])
    mean, half = (a + b) / 2, 12.7062 * abs(a - b) / 2
    gigpo = next(row for row in summary if row[2] == "gigpo")
    assert gigpo[1] == "sokoban-tiny-cpu-campaign"  # runs of one campaign, ranked within it
    assert gigpo[3:5] == ["2", "0, 1"]
    assert gigpo[5].strip() == (
        f"{100 * mean:.1f} \\[{100 * (mean - half):.1f}, {100 * (mean + half):.1f}\\]"
    )
    # The curves of the runs start at 40% (iteration 20) and end at 50%: the trainer's final
    # validation in the metadata (0.5) is what the final column shows.
    assert gigpo[6].strip() == "40.0 → 50.0"
    grpo = next(row for row in summary if row[2] == "grpo")
    assert grpo[5].strip() == f"{100 * success_by_hand(runs[2]):.1f} \\[—\\]"
    assert "](site/sokoban-val-trained.png)" in section
    assert (root / "site" / "sokoban-val-trained.png").is_file()
    page = (root / "site" / "index.html").read_text("utf-8")
    assert page.count('class="trained-row"') == 3 and 'id="sokoban-val-trained"' in page


# ------------------------------------------------------------------------------ file-runs
#: The tiny run of the CLI tests, validated greedily (file-runs gets the same overrides).
TINY_GREEDY = [*TINY, "val_greedy=true"]


@pytest.mark.slow  # a tiny training run, then the 500 Sokoban test levels
def test_file_runs_files_each_finished_run_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch")
    yaml = pytest.importorskip("yaml")
    pytest.importorskip("matplotlib")
    from agentbench_rl.cli import main
    from agentbench_rl.core.hashing import weights_fingerprint
    from agentbench_rl.train.sweep import load_sweep, run_sweep

    sweep = tmp_path / "tiny.yaml"
    runs_root = tmp_path / "runs"
    sweep.write_text(
        yaml.safe_dump({"name": "t", "out": str(runs_root), "grid": {"seed": [0, 1]}, "base": {}})
    )
    run_sweep(load_sweep(sweep), TINY_GREEDY, runner="sequential")
    (runs_root / "t" / "seed1" / "done.json").unlink()  # seed 1 "has not finished"
    root = tmp_path / "boards"

    with pytest.raises(SystemExit) as first:
        main(["leaderboard", "file-runs", str(sweep), *TINY_GREEDY, "--root", str(root)])
    assert first.value.code in (0, None), capsys.readouterr().err
    filed = stored_submissions(root)
    assert len(filed) == 1 and filed[0].parent == root / "sokoban" / "test"
    run = runs_root / "t" / "seed0"
    meta = read_json(filed[0] / "metadata.json")
    training_run = meta["training_run"]
    state = read_json(run / "checkpoint" / "state.json")
    assert training_run["weights"] == weights_fingerprint(run / "checkpoint" / "policy")
    assert training_run["weights"] == state["weights"]
    assert training_run["git_commit"] == state["git_commit"]
    assert (
        training_run["config_sha256"]
        == hashlib.sha256((run / "config.yaml").read_bytes()).hexdigest()
    )
    assert (training_run["cell"], training_run["seed"]) == ("t", 0)
    assert (training_run["sweep"], training_run["overrides"]) == (str(sweep), TINY_GREEDY)
    # The harness's replay of the final validation equals what the trainer recorded.
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    final = [row for row in rows if row["iteration"] == 1 and "val_success" in row][-1]
    assert math.isclose(training_run["val_success"], final["val_success"])
    assert training_run["val_success_harness"] == training_run["val_success"]
    assert meta["seeds"] == [0] and meta["estimator"] == "gigpo"
    assert meta["training"] == {"iterations": 1, "rollouts": 2}
    summary = read_json(filed[0] / "summary.json")
    assert summary["agent"] == f"hf:{run}/checkpoint/policy?greedy=true"
    assert read_json(filed[0] / "curves.json") == {
        "0": {str(row["iteration"]): row["val_success"] for row in rows if "val_success" in row}
    }
    assert "trained here" in (root / "README.md").read_text("utf-8")
    assert not (root / ".file-runs").exists()  # the scratch evaluations are gone

    # A rerun files nothing new; a run trained with another config is named, not filed.
    with pytest.raises(SystemExit) as second:
        main(
            [
                "leaderboard",
                "file-runs",
                str(sweep),
                *TINY_GREEDY,
                "group_size=4",
                "--root",
                str(root),
            ]
        )
    err = capsys.readouterr().err
    assert second.value.code == 1
    assert "trained with group_size 2 but the sweep gives 4" in err
    with pytest.raises(SystemExit) as third:
        main(["leaderboard", "file-runs", str(sweep), *TINY_GREEDY, "--root", str(root)])
    assert third.value.code in (0, None), capsys.readouterr().err
    assert stored_submissions(root) == filed

    # Episodes another entry already has (two collapsed policies can play the same ones): the
    # run is named, not filed, and the command goes on to the others.
    from agentbench_rl.leaderboard import trained
    from agentbench_rl.leaderboard.validate import SubmissionError

    def same_episodes(folder: Path, board: Path) -> Path:
        raise SubmissionError("these episodes are on the board already as elsewhere")

    shutil.rmtree(filed[0])
    monkeypatch.setattr(trained, "submit", same_episodes)
    with pytest.raises(SystemExit) as fourth:
        main(["leaderboard", "file-runs", str(sweep), *TINY_GREEDY, "--root", str(root)])
    err = capsys.readouterr().err
    assert fourth.value.code == 1 and "not filed: these episodes are on the board already" in err
    assert not (root / ".file-runs").exists()


# ------------------------------------------------------------------------------ run checks
def fake_run(folder: Path, iterations: int = 2) -> dict[str, Any]:
    """A finished run folder as the trainer leaves it (weights are any bytes: only their
    fingerprint matters here); returns the config dict its sweep would give it."""
    yaml = pytest.importorskip("yaml")
    from agentbench_rl.core.hashing import weights_fingerprint
    from agentbench_rl.train.config import TrainConfig, dump_config

    config = TrainConfig(iterations=iterations)
    config.bc.cache_dir = "/somewhere/.bc-cache"
    (folder / "checkpoint" / "policy").mkdir(parents=True)
    (folder / "checkpoint" / "policy" / "model.safetensors").write_bytes(b"weights")
    weights = weights_fingerprint(folder / "checkpoint" / "policy")
    (folder / "config.yaml").write_text(dump_config(config))
    write_json(
        folder / "checkpoint" / "state.json",
        {"iteration": iterations, "weights": weights, "git_commit": "a" * 40, "git_dirty": False},
    )
    rows = [
        {"iteration": 0, "val_success": 0.25, "val_weights": "x"},
        *({"iteration": i} for i in range(1, iterations)),
        {"iteration": iterations, "val_success": 0.5, "val_weights": weights},
    ]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    write_json(folder / "done.json", {"iterations": iterations, "last_checkpoint": iterations})
    expected = yaml.safe_load(dump_config(config))
    expected["bc"]["cache_dir"] = "elsewhere/.bc-cache"  # where BC is cached changes no number
    return dict(expected)


def test_check_run_reads_a_finished_run(tmp_path: Path) -> None:
    from agentbench_rl.leaderboard.trained import check_run

    expected = fake_run(tmp_path)
    record = check_run(tmp_path, expected)
    assert (
        record["config_sha256"]
        == hashlib.sha256((tmp_path / "config.yaml").read_bytes()).hexdigest()
    )
    assert record["weights"] == read_json(tmp_path / "checkpoint" / "state.json")["weights"]
    assert (record["iterations"], record["git_commit"], record["git_dirty"]) == (2, "a" * 40, False)
    assert record["validation"]["val_success"] == 0.5


def _edit_state(run: Path, **values: Any) -> None:
    state = read_json(run / "checkpoint" / "state.json")
    write_json(run / "checkpoint" / "state.json", {**state, **values})


def _edit_rows(run: Path, edit: Any) -> None:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    (run / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in edit(rows)))


def _edit_final_row(run: Path, **values: Any) -> None:
    _edit_rows(run, lambda rows: [*rows[:-1], {**rows[-1], **values}])


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda run, expected: expected.update(learning_rate=0.5),
            "trained with learning_rate 1e-06 but the sweep gives 0.5",
        ),
        (
            lambda run, expected: _edit_state(run, weights="0" * 16),
            "checkpoint/policy has weights",
        ),
        (
            lambda run, expected: _edit_state(run, iteration=1),
            "the checkpoint is of iteration 1, not the last (2)",
        ),
        (
            lambda run, expected: _edit_final_row(run, val_weights="f" * 16),
            "the final validation played weights ffffffffffffffff",
        ),
        (
            lambda run, expected: (
                _edit_final_row(run, val_success=None)
                or _edit_rows(
                    run, lambda rows: [{k: v for k, v in r.items() if v is not None} for r in rows]
                )
            ),
            "metrics.jsonl has no validation of the last iteration 2",
        ),
        (  # a row lost: the curve would have a gap
            lambda run, expected: _edit_rows(run, lambda rows: [rows[0], rows[2]]),
            "metrics.jsonl line 2 is iteration 2, but iteration 1 is missing before it",
        ),
        (  # a row recorded twice
            lambda run, expected: _edit_rows(run, lambda rows: [rows[0], rows[1], *rows[1:]]),
            "metrics.jsonl line 3 repeats iteration 1",
        ),
        (  # done.json claims more than the journal holds
            lambda run, expected: write_json(run / "done.json", {"iterations": 6}),
            "done.json says 6 iterations but",
        ),
        (
            lambda run, expected: (run / "checkpoint" / "state.json").unlink(),
            "checkpoint/state.json is missing",
        ),
    ],
)
def test_check_run_names_what_does_not_fit(tmp_path: Path, edit: Any, message: str) -> None:
    from agentbench_rl.leaderboard.trained import RunError, check_run

    expected = fake_run(tmp_path)
    edit(tmp_path, expected)
    with pytest.raises(RunError) as refused:
        check_run(tmp_path, expected)
    assert message in str(refused.value) and str(tmp_path) in str(refused.value)


@pytest.mark.parametrize(("length", "accepted"), [(120, True), (500, True), (501, False)])
def test_an_agent_spec_may_be_a_long_checkpoint_path(
    runs: dict[int, Path], tmp_path: Path, length: int, accepted: bool
) -> None:
    folder = copy_of(runs[0], tmp_path / "s")
    write_json(folder / "metadata.json", metadata(0))
    agent = "hf:/" + "x" * (length - len("hf:/?greedy=true")) + "?greedy=true"
    assert len(agent) == length
    for name in ("summary.json", "config.json"):
        data = read_json(folder / name)
        data["agent"] = agent
        if name == "summary.json":
            data["config"]["agent"] = agent
        write_json(folder / name, data)
    if accepted:
        assert validate_submission(folder).agent == agent
    else:
        assert rejection(folder) == (
            "summary.json: agent must be one line of printable text (at most 500 characters)"
        )
