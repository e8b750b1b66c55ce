"""Leaderboards: metadata schema, validation (tamper tests by hand and by hypothesis), filing,
rendering (values, determinism, escaping), the reported rows, the CLI and the committed board.

The base submission is a real run of the harness: the random agent on the 200 Sokoban val levels
with seeds 0 and 1. Expected figures are recomputed here with pandas from the episodes, never read
from the code under test.
"""

from __future__ import annotations

import doctest
import importlib
import json
import shutil
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from submission_helpers import (
    copy_of,
    episodes_of,
    read_json,
    rejection,
    write_episodes,
    write_json,
)

from agentbench_rl.cli import main
from agentbench_rl.core.hashing import stable_hash
from agentbench_rl.envs import ENVS, env_class
from agentbench_rl.harness.config import EvalConfig
from agentbench_rl.harness.evaluate import evaluate
from agentbench_rl.leaderboard.board import collect_boards
from agentbench_rl.leaderboard.render import render, reported_table
from agentbench_rl.leaderboard.reported import Paper, ReportedRow, load_reported
from agentbench_rl.leaderboard.schema import SubmissionMetadata
from agentbench_rl.leaderboard.serve import make_server, site_url
from agentbench_rl.leaderboard.store import stored_submissions, submit
from agentbench_rl.leaderboard.validate import SubmissionError, validate_submission

REPO = Path(__file__).resolve().parents[2]
SEEDS = [0, 1]
METADATA: dict[str, Any] = {
    "name": "random (test)",
    "estimator": None,
    "training": None,
    "parameters": None,
    "seeds": SEEDS,
    "code_version": "test",
    "contact": "tests",
    "url": None,
}
TRAINED: dict[str, Any] = {
    **METADATA,
    "name": "tiny GiGPO (test)",
    "estimator": "gigpo",
    "training": {"iterations": 40, "rollouts": 1280},
    "parameters": 1_234_567,
    "url": "https://example.org/run",
}


# ------------------------------------------------------------------------------ helpers
@pytest.fixture(scope="session")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A valid submission: random agent, sokoban/val, seeds 0 and 1 (never modified)."""
    folder = tmp_path_factory.mktemp("leaderboard") / "base"
    evaluate(EvalConfig(env="sokoban", split="val", agent="random", seeds=SEEDS), folder)
    write_json(folder / "metadata.json", METADATA)
    return folder


def set_outcome(episodes: pd.DataFrame, rows: list[int], won: bool) -> None:
    """Make ``rows`` wins (or losses) a Sokoban run could give: score 1 (0), and the return of
    the standard reward rule by hand: -0.1 a step, +1 for the box reaching its target and +10
    for solving on a win, nothing more on a loss."""
    episodes.loc[rows, "success"] = won
    episodes.loc[rows, "score"] = 1.0 if won else 0.0
    steps = episodes.loc[rows, "steps"]
    episodes.loc[rows, "return"] = (-0.1 * steps + (11.0 if won else 0.0)).round(10)


def success_mean_by_hand(episodes: pd.DataFrame) -> float:
    """The success figure: the mean over seeds of each seed's success rate, 6 decimals."""
    per_seed = [group["success"].mean() for _, group in episodes.groupby("seed")]
    return round(sum(per_seed) / len(per_seed), 6)


# ------------------------------------------------------------------------------ schema
@pytest.mark.parametrize("field", sorted(METADATA))
def test_every_metadata_field_is_required(base: Path, tmp_path: Path, field: str) -> None:
    folder = copy_of(base, tmp_path / "s")
    write_json(folder / "metadata.json", {k: v for k, v in METADATA.items() if k != field})
    assert rejection(folder) == f"metadata.json: field '{field}' is missing"


BAD_METADATA = [
    ({"parameters": "7"}, "field 'parameters': Input should be a valid integer"),
    ({"parameters": True}, "field 'parameters': Input should be a valid integer"),
    ({"seeds": [0, 0]}, "field 'seeds': Value error, seeds repeat: [0]"),
    ({"seeds": []}, "field 'seeds': List should have at least 1 item after validation, not 0"),
    ({"url": "javascript:alert(1)"}, "field 'url' must be an http:// or https:// URL"),
    ({"name": "two\nlines"}, "field 'name' must be one line of printable text"),
    ({"training": {"iterations": 3}}, "field 'training.rollouts' is missing"),
    ({"homepage": "x"}, "unknown field 'homepage'"),
]


@pytest.mark.parametrize(("change", "message"), BAD_METADATA)
def test_metadata_refuses_bad_values(
    base: Path, tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    folder = copy_of(base, tmp_path / "s")
    write_json(folder / "metadata.json", {**METADATA, **change})
    assert rejection(folder) == f"metadata.json: {message}"


def test_metadata_schema_accepts_a_trained_entry() -> None:
    metadata = SubmissionMetadata.model_validate(TRAINED)
    assert metadata.training is not None and metadata.training.rollouts == 1280
    assert metadata.url == "https://example.org/run"


# ------------------------------------------------------------------------------ validation
def test_a_valid_submission_passes_with_figures_recomputed(base: Path) -> None:
    submission = validate_submission(base)
    episodes = episodes_of(base)
    assert (submission.env, submission.split, submission.agent) == ("sokoban", "val", "random")
    assert submission.figures["n_episodes"] == 400 and submission.figures["n_tasks"] == 200
    assert submission.figures["success"]["mean"] == success_mean_by_hand(episodes)
    easy = episodes[episodes["category"] == "easy"]
    assert submission.figures["per_category"]["easy"]["success"]["mean"] == (
        success_mean_by_hand(easy)
    )
    assert submission.files == ("config.json", "episodes.csv", "metadata.json", "summary.json")
    assert submission.curves is None and submission.threshold is None


def test_tamper_one_episode_removed(base: Path, tmp_path: Path) -> None:
    folder = copy_of(base, tmp_path / "s")
    episodes = episodes_of(folder)
    write_episodes(folder, episodes.drop(index=205))  # seed 1, the 6th level: val-0005
    assert episodes.loc[205, ["task_id", "seed"]].tolist() == ["val-0005", 1]
    assert rejection(folder) == (
        "episodes.csv: task val-0005 is missing for seed 1 "
        "(every task of the split must appear once per seed)"
    )


def test_tamper_one_episode_duplicated(base: Path, tmp_path: Path) -> None:
    folder = copy_of(base, tmp_path / "s")
    episodes = episodes_of(folder)
    write_episodes(folder, pd.concat([episodes, episodes.loc[[17]]], ignore_index=True))
    assert rejection(folder) == "episodes.csv: task val-0017 appears 2 times for seed 0"


def test_tamper_success_flipped_in_episodes_not_summary(base: Path, tmp_path: Path) -> None:
    folder = copy_of(base, tmp_path / "s")
    episodes = episodes_of(folder)
    stored = read_json(folder / "summary.json")["success"]["mean"]
    row = int(episodes.index[~episodes["success"]][0])
    set_outcome(episodes, [row], won=True)
    write_episodes(folder, episodes)
    # One more win among 200 episodes of one seed: the mean over two seeds rises by 1/400.
    assert success_mean_by_hand(episodes) == round(stored + 1 / 400, 6)
    assert rejection(folder) == (
        f"summary.json: success.mean is {stored} "
        f"but the episodes give {success_mean_by_hand(episodes)}"
    )


def test_tamper_summary_figure_changed(base: Path, tmp_path: Path) -> None:
    folder = copy_of(base, tmp_path / "s")
    summary = read_json(folder / "summary.json")
    true_value = summary["per_category"]["hard"]["score"]["mean"]
    summary["per_category"]["hard"]["score"]["mean"] = 0.99
    write_json(folder / "summary.json", summary)
    assert rejection(folder) == (
        f"summary.json: per_category.hard.score.mean is 0.99 but the episodes give {true_value}"
    )


def test_tamper_seed_added_to_episodes_not_declared(base: Path, tmp_path: Path) -> None:
    folder = copy_of(base, tmp_path / "s")
    episodes = episodes_of(folder)
    extra = episodes[episodes["seed"] == 0].assign(seed=7)
    write_episodes(folder, pd.concat([episodes, extra], ignore_index=True))
    declared = "episodes.csv: seed 7 is not declared in metadata.json (declared: 0, 1)"
    assert rejection(folder) == declared


def test_tamper_split_checksum_changed(base: Path, tmp_path: Path) -> None:
    folder = copy_of(base, tmp_path / "s")
    summary = read_json(folder / "summary.json")
    summary["split_checksum"] = "0" * 32
    write_json(folder / "summary.json", summary)
    # What the summary must hold: the split's manifest checksum bound to the env id.
    installed = stable_hash(["sokoban", env_class("sokoban").split_checksum("val")])
    assert rejection(folder) == (
        f'summary.json: split_checksum "{"0" * 32}" differs from the installed '
        f'package\'s "{installed}" for sokoban/val'
    )


@pytest.mark.parametrize("name", ["metadata.json", "summary.json", "config.json"])
def test_tamper_file_not_json(base: Path, tmp_path: Path, name: str) -> None:
    folder = copy_of(base, tmp_path / "s")
    (folder / name).write_text("task_id,success\nval-0000,True\n")
    assert rejection(folder) == f"{name} is not valid JSON (line 1, column 1: Expecting value)"


def test_tamper_metadata_field_missing(base: Path, tmp_path: Path) -> None:
    folder = copy_of(base, tmp_path / "s")
    write_json(folder / "metadata.json", {k: v for k, v in METADATA.items() if k != "seeds"})
    assert rejection(folder) == "metadata.json: field 'seeds' is missing"


def _edit_summary(key: str, value: Any) -> Any:
    def edit(folder: Path) -> None:
        summary = read_json(folder / "summary.json")
        summary[key] = value
        write_json(folder / "summary.json", summary)

    return edit


def _edit_config(key: str, value: Any) -> Any:
    def edit(folder: Path) -> None:
        for name in ("config.json", "summary.json"):
            data = read_json(folder / name)
            (data if name == "config.json" else data["config"])[key] = value
            write_json(folder / name, data)

    return edit


def _edit_episodes(change: Any) -> Any:
    def edit(folder: Path) -> None:
        write_episodes(folder, change(episodes_of(folder)))

    return edit


MORE_TAMPERS = [
    (
        lambda f: (f / "episodes.csv").unlink(),
        "episodes.csv (or episodes.parquet) is missing from {folder}",
    ),
    (lambda f: (f / "summary.json").unlink(), "summary.json is missing from {folder}"),
    (
        lambda f: (f / "episodes.csv").write_bytes(b"\xff\xfe\x00garbage"),
        "episodes.csv cannot be read as a table "
        "('utf-8' codec can't decode byte 0xff in position 0: invalid start byte)",
    ),
    (
        _edit_summary("seeds", [0, 1, 2]),
        "summary.json: seeds [0, 1, 2] differ from the seeds declared in metadata.json (0, 1)",
    ),
    (_edit_summary("env", "chess"), 'summary.json: unknown env "chess" (choose from {envs})'),
    (
        _edit_summary("split", "train"),
        'summary.json: "train" is not an evaluation split of sokoban (choose from val, test)',
    ),
    (
        _edit_summary("complete_split", False),
        "summary.json: complete_split is false but the episodes give true",
    ),
    (_edit_summary("note", "hi"), "summary.json: note is not a figure the episodes give"),
    (
        _edit_config("limit", 20),
        "config.json: limit is 20; a submission needs the standard evaluation (limit null)",
    ),
    (
        _edit_config("max_steps", 99),
        "config.json: max_steps is 99; a submission needs the standard evaluation (max_steps null)",
    ),
    (
        _edit_episodes(lambda e: e.drop(columns="steps")),
        "episodes.csv: column 'steps' is missing",
    ),
    (
        _edit_episodes(lambda e: e.assign(success=e["success"].astype(int))),
        "episodes.csv: column 'success' must hold True or False only",
    ),
    (
        _edit_episodes(lambda e: e.assign(score=e["score"] * 2 - 0.5)),
        "episodes.csv line 2: score is outside [0, 1]",
    ),
    (
        _edit_episodes(lambda e: e.replace({"task_id": {"val-0003": "val-9999"}})),
        "episodes.csv line 5: task 'val-9999' is not in sokoban/val",
    ),
    (
        _edit_episodes(lambda e: e.assign(category=e["category"].where(e.index != 1, "weird"))),
        "episodes.csv: task val-0001 has categories '{category}' and 'weird' in different seeds",
    ),
]


@pytest.mark.parametrize(("edit", "message"), MORE_TAMPERS)
def test_more_tampers_are_named(base: Path, tmp_path: Path, edit: Any, message: str) -> None:
    folder = copy_of(base, tmp_path / "s")
    category = episodes_of(folder).loc[1, "category"]
    edit(folder)
    envs = ", ".join(sorted(ENVS))
    assert rejection(folder) == message.format(folder=folder, category=category, envs=envs)


# ------------------------------------------------------------------------------ hypothesis
PROPERTY_SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@PROPERTY_SETTINGS
@given(data=st.data())
def test_property_dropped_rows_are_named(base: Path, tmp_path: Path, data: st.DataObject) -> None:
    rows = data.draw(st.sets(st.integers(0, 399), min_size=1, max_size=30), label="dropped")
    folder = copy_of(base, tmp_path / f"drop-{len(list(tmp_path.iterdir()))}")
    episodes = episodes_of(folder)
    write_episodes(folder, episodes.drop(index=sorted(rows)))
    # The first problem in (seed, split order): the lowest dropped row.
    first = episodes.loc[min(rows)]
    assert rejection(folder) == (
        f"episodes.csv: task {first['task_id']} is missing for seed {first['seed']} "
        "(every task of the split must appear once per seed)"
    )


@PROPERTY_SETTINGS
@given(data=st.data())
def test_property_duplicated_rows_are_named(
    base: Path, tmp_path: Path, data: st.DataObject
) -> None:
    rows = data.draw(st.lists(st.integers(0, 399), min_size=1, max_size=20), label="repeated")
    folder = copy_of(base, tmp_path / f"dup-{len(list(tmp_path.iterdir()))}")
    episodes = episodes_of(folder)
    write_episodes(folder, pd.concat([episodes, episodes.loc[rows]], ignore_index=True))
    first = min(rows)
    task, seed = episodes.loc[first, "task_id"], episodes.loc[first, "seed"]
    assert rejection(folder) == (
        f"episodes.csv: task {task} appears {1 + rows.count(first)} times for seed {seed}"
    )


@PROPERTY_SETTINGS
@given(data=st.data())
def test_property_flipped_successes_are_caught(
    base: Path, tmp_path: Path, data: st.DataObject
) -> None:
    folder = copy_of(base, tmp_path / f"flip-{len(list(tmp_path.iterdir()))}")
    episodes = episodes_of(folder)
    # Flip in one direction only, so the success rate must move (flips cannot cancel out).
    to_win = data.draw(st.booleans(), label="to win")
    candidates = sorted(int(i) for i in episodes.index[episodes["success"] != to_win])
    rows = data.draw(st.sets(st.sampled_from(candidates), min_size=1, max_size=10), label="rows")
    stored = read_json(folder / "summary.json")["success"]["mean"]
    set_outcome(episodes, sorted(rows), won=to_win)
    write_episodes(folder, episodes)
    assert rejection(folder) == (
        f"summary.json: success.mean is {stored} "
        f"but the episodes give {success_mean_by_hand(episodes)}"
    )


def _leaves(value: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if isinstance(value, dict):
        return [leaf for key in value for leaf in _leaves(value[key], (*path, key))]
    if isinstance(value, list):
        return [leaf for i, item in enumerate(value) for leaf in _leaves(item, (*path, str(i)))]
    return [path]


FIGURE_KEYS = (
    "n_episodes",
    "n_tasks",
    "success",
    "score",
    "mean_steps",
    "mean_return",
    "invalid_action_rate",
    "per_category",
    "threshold_95",
)


@PROPERTY_SETTINGS
@given(data=st.data())
def test_property_perturbed_summary_figures_are_named(
    base: Path, tmp_path: Path, data: st.DataObject
) -> None:
    folder = copy_of(base, tmp_path / f"perturb-{len(list(tmp_path.iterdir()))}")
    summary = read_json(folder / "summary.json")
    leaves = [leaf for key in FIGURE_KEYS for leaf in _leaves(summary[key], (key,))]
    path = data.draw(st.sampled_from(leaves), label="figure")
    parent = summary
    for key in path[:-1]:
        parent = parent[int(key)] if isinstance(parent, list) else parent[key]
    last: Any = int(path[-1]) if isinstance(parent, list) else path[-1]
    true_value = parent[last]
    if isinstance(true_value, bool):
        parent[last] = not true_value
    elif isinstance(true_value, str):
        parent[last] = true_value + " (edited)"
    else:
        delta = data.draw(st.floats(1e-6, 10.0) | st.floats(-10.0, -1e-6), label="delta")
        parent[last] = true_value + delta
    write_json(folder / "summary.json", summary)
    assert rejection(folder) == (
        f"summary.json: {'.'.join(path)} is {json.dumps(parent[last])} "
        f"but the episodes give {json.dumps(true_value)}"
    )


@PROPERTY_SETTINGS
@given(data=st.data())
def test_property_undeclared_seeds_are_named(
    base: Path, tmp_path: Path, data: st.DataObject
) -> None:
    seeds = data.draw(
        st.sets(st.integers(2, 2**32 - 1), min_size=1, max_size=3), label="undeclared seeds"
    )
    folder = copy_of(base, tmp_path / f"seed-{len(list(tmp_path.iterdir()))}")
    episodes = episodes_of(folder)
    rows = data.draw(st.sets(st.integers(0, 199), min_size=1, max_size=200), label="rows")
    extra = [episodes.loc[sorted(rows)].assign(seed=seed) for seed in sorted(seeds)]
    write_episodes(folder, pd.concat([episodes, *extra], ignore_index=True))
    assert rejection(folder) == (
        f"episodes.csv: seed {min(seeds)} is not declared in metadata.json (declared: 0, 1)"
    )


# ------------------------------------------------------------------------------ curves
def trained_copy(base: Path, target: Path, curves: Any) -> Path:
    folder = copy_of(base, target)
    write_json(folder / "metadata.json", TRAINED)
    if isinstance(curves, dict):
        write_json(folder / "curves.json", curves)
    else:
        for seed, lines in curves:
            path = folder / "curves" / f"seed-{seed}" / "metrics.jsonl"
            path.parent.mkdir(parents=True)
            path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


def test_curves_json_gives_the_threshold_iterations(base: Path, tmp_path: Path) -> None:
    curves = {"0": {"10": 0.5, "20": 0.96, "30": 0.99}, "1": {"10": 0.8, "40": 0.9}}
    submission = validate_submission(trained_copy(base, tmp_path / "s", curves))
    assert submission.curves == {0: {10: 0.5, 20: 0.96, 30: 0.99}, 1: {10: 0.8, 40: 0.9}}
    assert submission.threshold is not None
    assert submission.threshold.first_iteration == {"0": 20, "1": None}
    assert submission.threshold.all_reached is False
    assert submission.files[0] == "config.json" and "curves.json" in submission.files


def test_metrics_jsonl_per_seed_is_read_like_the_trainer_writes_it(
    base: Path, tmp_path: Path
) -> None:
    lines = {
        0: [{"iteration": 0, "loss": 1.0}, {"iteration": 5, "val_success": 0.97}],
        1: [{"iteration": 5, "val_success": 0.4}, {"iteration": 10, "val_success": 0.95}],
    }
    submission = validate_submission(trained_copy(base, tmp_path / "s", list(lines.items())))
    assert submission.curves == {0: {5: 0.97}, 1: {5: 0.4, 10: 0.95}}
    assert submission.threshold is not None and submission.threshold.all_reached
    assert submission.threshold.first_iteration == {"0": 5, "1": 10}
    assert "curves/seed-1/metrics.jsonl" in submission.files


def _jsonl(*iterations: int) -> list[dict[str, Any]]:
    return [{"iteration": iteration, "val_success": 0.5} for iteration in iterations]


BAD_CURVES = [
    ({"0": {"10": 0.5}}, "training curves cover seeds 0 but metadata.json declares seeds 0, 1"),
    (
        {"0": {"10": 0.5}, "1": {"50": 0.9}},
        "the training curve of seed 1 reaches iteration 50, past the declared budget of 40 "
        "iterations",
    ),
    (
        {"0": {"10": 1.5}, "1": {"10": 0.9}},
        "curves.json: seed 0, iteration 10: success 1.5 is outside [0, 1]",
    ),
    (
        {"0": {"ten": 0.5}, "1": {"10": 0.9}},
        "curves.json: seed 0: iteration 'ten' is not a whole number",
    ),
    (
        [(0, _jsonl(1)), (1, _jsonl(2, 2))],
        "curves/seed-1/metrics.jsonl line 2: validation iteration 2 appears twice",
    ),
    (
        [(0, _jsonl(1)), (1, [{"step": 2}])],
        "curves/seed-1/metrics.jsonl line 1: 'iteration' must be a whole number",
    ),
]


@pytest.mark.parametrize(("curves", "message"), BAD_CURVES)
def test_bad_curves_are_named(base: Path, tmp_path: Path, curves: Any, message: str) -> None:
    assert rejection(trained_copy(base, tmp_path / "s", curves)) == message


def test_curves_without_declared_training_are_refused(base: Path, tmp_path: Path) -> None:
    folder = copy_of(base, tmp_path / "s")
    write_json(folder / "curves.json", {"0": {"1": 0.5}, "1": {"1": 0.5}})
    assert rejection(folder) == (
        "the submission carries training curves but metadata.json declares no training"
    )


# ------------------------------------------------------------------------------ filing
def test_submit_files_a_copy_and_never_overwrites(base: Path, tmp_path: Path) -> None:
    root = tmp_path / "boards"
    filed = submit(base, root)
    assert filed.parent == root / "sokoban" / "val"
    assert filed.name.startswith("random-test-") and len(filed.name) == len("random-test-") + 12
    names = ["config.json", "episodes.csv", "metadata.json", "summary.json"]
    assert sorted(p.name for p in filed.iterdir()) == names
    for name in ("episodes.csv", "summary.json", "metadata.json", "config.json"):
        assert (filed / name).read_bytes() == (base / name).read_bytes()
    with pytest.raises(SubmissionError, match="already on the board as"):
        submit(base, root)
    other = copy_of(base, tmp_path / "other")
    write_json(other / "metadata.json", {**METADATA, "contact": "someone else"})
    with pytest.raises(SubmissionError, match="these episodes are on the board already as"):
        submit(other, root)  # the same episodes under other metadata: filed once
    assert (filed / "metadata.json").read_bytes() == (base / "metadata.json").read_bytes()
    assert stored_submissions(root) == [filed]


def test_submit_refuses_an_invalid_submission_and_leaves_nothing(
    base: Path, tmp_path: Path
) -> None:
    folder = copy_of(base, tmp_path / "s")
    write_episodes(folder, episodes_of(folder).drop(index=3))
    root = tmp_path / "boards"
    with pytest.raises(SubmissionError, match="task val-0003 is missing for seed 0"):
        submit(folder, root)
    assert not root.exists() or not any(root.rglob("*"))


def test_a_filed_submission_edited_afterwards_is_left_off_with_a_warning(
    base: Path, tmp_path: Path
) -> None:
    root = tmp_path / "boards"
    filed = submit(base, root)
    write_json(filed / "metadata.json", {**METADATA, "name": "random (renamed)"})
    skipped: list[str] = []
    render(root, on_skip=skipped.append)
    assert len(skipped) == 1
    assert skipped[0].startswith(f"skipped sokoban/val/{filed.name}: its files give the id")
    assert "random (renamed)" not in (root / "README.md").read_text("utf-8")


# ------------------------------------------------------------------------------ rendering
@pytest.fixture(scope="session")
def board_root(base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A board with three entries on sokoban/val: random, the trained one with curves, and a
    one-seed expert."""
    scratch = tmp_path_factory.mktemp("board")
    root = scratch / "boards"
    submit(base, root)
    curves = {"0": {"10": 0.5, "20": 0.96}, "1": {"10": 0.97, "30": 0.99}}
    # a trained entry with episodes of its own (the same episodes are filed once)
    played = scratch / "played"
    evaluate(EvalConfig(env="sokoban", split="val", agent="noisy:0.5:expert", seeds=SEEDS), played)
    submit(trained_copy(played, scratch / "trained", curves), root)
    expert = scratch / "expert"
    evaluate(EvalConfig(env="sokoban", split="val", agent="expert", seeds=[3]), expert)
    write_json(
        expert / "metadata.json",
        {**METADATA, "name": "expert <b>|x|</b>", "seeds": [3], "url": "https://example.org/e"},
    )
    submit(expert, root)
    render(root)
    return root


def table_rows(markdown: str, heading: str) -> list[list[str]]:
    """The body rows of the first table after ``heading``, as cell texts."""
    lines = markdown.split(heading + "\n", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def test_markdown_board_ranks_entries_with_values_from_the_episodes(
    base: Path, board_root: Path
) -> None:
    markdown = (board_root / "README.md").read_text("utf-8")
    rows = table_rows(markdown, "### sokoban / val")
    assert [row[0] for row in rows] == ["1", "2", "3"]
    assert rows[0][1].startswith("[expert \\<b\\>\\|x\\|\\</b\\>](sokoban/val/expert-b-x-b-")
    assert rows[0][1].endswith("/) [(link)](https://example.org/e)")
    # The expert wins everything: 100%, and its one-seed interval is Wilson's for 200/200:
    # lower bound = n / (n + z^2) = 200 / 203.8415 = 0.98115.
    # Every bootstrap resample of 200 successes has mean 1, so that interval is [100, 100].
    assert rows[0][6] == "100.0 \\[98.1, 100.0; bootstrap 100.0, 100.0\\]"
    assert rows[0][7] == "—"  # pass@k: one seed, where it is the success rate
    assert rows[0][11] == "1/1 seeds"
    episodes = episodes_of(base)
    success = 100 * success_mean_by_hand(episodes)
    # The trained entry (a noisy expert's episodes) above the random one.
    assert [row[1].split("](")[0] for row in rows[1:]] == ["[tiny GiGPO (test)", "[random (test)"]
    assert rows[2][6].startswith(f"{success:.1f} \\[")
    hard = episodes[episodes["category"] == "hard"]
    assert rows[2][9] == f"{100 * success_mean_by_hand(hard):.1f}"
    assert rows[1][2:5] == ["gigpo", "1.2M", "40 it. / 1,280 rollouts"]
    assert rows[1][7].endswith("(k=2)")
    assert rows[1][11] == "0/2 seeds; first it. 20, 10 ✓"
    # what was recomputed here, apart from what the submission states
    assert rows[1][12] == "figures from the episodes"
    assert rows[1][13].startswith("test; results: agentbench-rl 0.1.0")  # and its commit


def test_reported_rows_are_apart_labelled_and_match_estimators_md(board_root: Path) -> None:
    markdown = (board_root / "README.md").read_text("utf-8")
    rows = table_rows(markdown, "### alfworld: reported by papers")
    assert all(row[-1] == "**reported**" for row in rows)
    by_method = {(row[0], row[1]): row[3] for row in rows}
    # docs/estimators.md: ALFWorld overall success, 1.5B / 7B.
    assert by_method[("Qwen2.5-1.5B-Instruct", "GRPO")] == "72.8 ± 3.6"
    assert by_method[("Qwen2.5-7B-Instruct", "GiGPO (w/ std)")] == "90.8 ± 1.3"
    assert by_method[("Qwen2.5-7B-Instruct", "BiPACE\\_Q")] == "97.1 ± 0.9"
    assert by_method[("Qwen2.5-1.5B-Instruct", "ECPO")] == "92.7"
    webshop = {
        (row[0], row[1]): (row[3], row[4])
        for row in table_rows(markdown, "### webshop: reported by papers")
    }
    assert webshop == {
        ("Qwen2.5-1.5B-Instruct", "ECPO"): ("71.9", "84.4"),
        ("Qwen2.5-1.5B-Instruct", "GiGPO (w/o std)"): ("67.4", "83.5"),
        ("Qwen2.5-1.5B-Instruct", "GRPO"): ("56.8", "75.8"),
        # the HGPO paper's WebShop 7B score; its success is not recorded
        ("Qwen2.5-7B-Instruct", "HGPO"): ("—", "88.4"),
        ("Qwen2.5-1.5B-Instruct", "SCPO"): ("74.8 ± 2.0", "—"),
        # tagged: not a group method
        ("Qwen2.5-7B-Instruct", "HiPER **critic-based** **hierarchical**"): ("83.3", "—"),
        # GraphGPO's own table as MileGPO and GRAFT copy it (issue #59)
        ("Qwen2.5-1.5B-Instruct", "GraphGPO"): ("78.7 ± 3.9", "89.3"),  # 78.65, 89.29
        ("Qwen2.5-7B-Instruct", "GraphGPO"): ("80.3 ± 1.3", "86.9"),
    }
    ecpo = {row[0]: row for row in rows if row[1] == "ECPO"}
    assert "Note: measured against ECPO's own re-run of GiGPO" in ecpo["Qwen2.5-1.5B-Instruct"][2]
    assert "Note: unresolved" in ecpo["Qwen2.5-7B-Instruct"][2]
    graphgpo = next(row for row in rows if row[1] == "GraphGPO" and "MileGPO" in row[2])
    assert "GRAFT (arXiv 2609.28963, Table 1)" in graphgpo[2]
    # Reported rows never enter a validated table.
    validated = table_rows(markdown, "### sokoban / val")
    assert not any("reported" in cell for row in validated for cell in row)


def test_reported_data_file_holds_every_number_of_estimators_md() -> None:
    reported = load_reported()
    table = {
        (row.env, row.model.split("-")[1], row.method_label, row.paper): (
            row.success,
            row.success_std,
            row.score,
        )
        for row in reported.rows
    }
    expected = {
        ("alfworld", "1.5B", "GRPO", "gigpo"): (72.8, 3.6, None),
        ("alfworld", "7B", "GRPO", "gigpo"): (77.6, 5.2, None),
        ("alfworld", "1.5B", "GiGPO (w/ std)", "gigpo"): (86.7, 1.7, None),
        ("alfworld", "7B", "GiGPO (w/ std)", "gigpo"): (90.8, 1.3, None),
        ("alfworld", "1.5B", "BiPACE_Q", "bipace"): (93.5, 1.2, None),
        ("alfworld", "7B", "BiPACE_Q", "bipace"): (97.1, 0.9, None),
        ("alfworld", "1.5B", "ECPO", "ecpo"): (92.7, None, None),
        ("alfworld", "7B", "ECPO", "ecpo"): (91.9, None, None),
        ("webshop", "1.5B", "GRPO", "gigpo"): (56.8, None, 75.8),
        ("webshop", "1.5B", "GiGPO (w/o std)", "gigpo"): (67.4, None, 83.5),
        ("webshop", "1.5B", "ECPO", "ecpo"): (71.9, None, 84.4),
        ("visual_sokoban", "VL", "GRPO", "gigpo"): (67.1, 4.7, None),
        ("visual_sokoban", "VL", "GiGPO", "gigpo"): (81.0, 3.6, None),
        ("textcraft", "1.5B", "GiGPO", "bipace"): (58.3, 7.8, None),
        ("textcraft", "7B", "GiGPO", "bipace"): (87.0, 2.4, None),
        ("textcraft", "1.5B", "BiPACE_Q", "bipace"): (65.1, 7.0, None),
        ("textcraft", "7B", "BiPACE_Q", "bipace"): (91.1, 2.4, None),
        # BiPACE's "HiGPO" baseline rows and the HGPO paper's own WebShop 7B score (issue #26)
        ("alfworld", "1.5B", "HiGPO", "bipace"): (92.8, None, None),
        ("alfworld", "7B", "HiGPO", "bipace"): (95.4, None, None),
        ("textcraft", "1.5B", "HiGPO", "bipace"): (59.4, None, None),
        ("textcraft", "7B", "HiGPO", "bipace"): (87.5, None, None),
        ("webshop", "7B", "HGPO", "hgpo"): (None, None, 88.4),
        # issue #42: SCPO and HiPER from their abstracts
        ("alfworld", "1.5B", "SCPO", "scpo"): (93.7, 4.1, None),
        ("webshop", "1.5B", "SCPO", "scpo"): (74.8, 2.0, None),
        ("alfworld", "7B", "HiPER", "hiper"): (97.4, None, None),
        ("webshop", "7B", "HiPER", "hiper"): (83.3, None, None),
        # issue #59: GraphGPO's own table as MileGPO and GRAFT copy it, with its GRPO and
        # GiGPO re-runs, and the 2026 graph-Bellman papers as the issue quotes them
        ("alfworld", "1.5B", "GraphGPO", "graphgpo"): (92.71, 1.3, None),
        ("alfworld", "7B", "GraphGPO", "graphgpo"): (95.3, 1.1, None),
        ("webshop", "1.5B", "GraphGPO", "graphgpo"): (78.65, 3.9, 89.29),
        ("webshop", "7B", "GraphGPO", "graphgpo"): (80.3, 1.3, 86.9),
        ("alfworld", "1.5B", "CRBC", "crbc"): (96.09, 0.64, None),
        ("alfworld", "7B", "CRBC", "crbc"): (96.88, 1.56, None),
        ("alfworld", "1.5B", "GraphHCA", "graphhca"): (95.7, 1.2, None),
        ("alfworld", "7B", "GraphHCA", "graphhca"): (96.9, 0.8, None),
        ("alfworld", "1.5B", "GraphHCA (power mean ω=5)", "graphhca"): (95.3, None, None),
        ("alfworld", "1.5B", "GraphHCA (power mean ω=10)", "graphhca"): (91.8, None, None),
        ("alfworld", "1.5B", "GraphHCA (max backup, ω=∞)", "graphhca"): (90.1, None, None),
        ("alfworld", "1.5B", "GRAFT", "graft"): (97.4, 0.4, None),
        ("alfworld", "7B", "GRAFT", "graft"): (98.4, 0.6, None),
    }
    expected.update(
        {
            ("alfworld", "1.5B", "GRPO", "graphgpo"): (77.86, None, None),  # its own re-runs
            ("alfworld", "1.5B", "GiGPO", "graphgpo"): (90.88, None, None),
            ("alfworld", "1.5B", "GraphGPO", "graphhca"): (91.0, None, None),  # GraphHCA's run
        }
    )
    assert table == expected

    assert {row.paper for row in reported.rows if row.env == "textcraft"} == {"bipace"}


def test_every_reported_paper_is_named_and_an_unnamed_one_is_marked() -> None:
    reported = load_reported()
    for key, paper in reported.papers.items():
        assert paper.named and "arxiv.org/abs/" in (paper.url or ""), key
    row = reported.rows[0]
    anonymous = reported.model_copy(
        update={
            "papers": {**reported.papers, row.paper: Paper(label="a paper", title=None, url=None)}
        }
    )
    cells = reported_table([row], anonymous).rows[0]
    assert any(part.text == "(source not identified)" for part in cells[5])
    assert not any(
        part.text == "(source not identified)"
        for part in reported_table([row], reported).rows[0][5]
    )


def test_a_reported_row_needs_a_number() -> None:
    row = load_reported().rows[0].model_dump()
    with pytest.raises(ValueError, match="neither success nor score"):
        ReportedRow.model_validate({**row, "success": None, "score": None})


def test_a_reported_variant_is_data_for_any_method() -> None:
    # Before, only GiGPO rows could carry a variant (a gigpo_std flag checked against the name).
    row = load_reported().rows[0].model_dump()
    plain = ReportedRow.model_validate({**row, "method": "RLOO", "estimator": "rloo"})
    assert plain.method_label == "RLOO"
    variant = ReportedRow.model_validate({**row, "method": "GRPO", "variant": "w/o std"})
    assert variant.method_label == "GRPO (w/o std)"
    with pytest.raises(ValueError, match="variant"):
        ReportedRow.model_validate({**row, "variant": ""})


def test_html_escapes_names_and_links_entries(board_root: Path) -> None:
    page = (board_root / "site" / "index.html").read_text("utf-8")
    assert "<b>|x|</b>" not in page and "expert &lt;b&gt;|x|&lt;/b&gt;" in page
    assert '<a href="https://example.org/e">(link)</a>' in page
    assert page.count('class="validated-row"') == 3
    assert page.count('class="reported-row"') == len(load_reported().rows)
    assert 'src="sokoban-val-curves.png"' in page
    for name in ("sokoban-val-success.png", "sokoban-val-categories.png", "sokoban-val-curves.png"):
        assert (board_root / "site" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rendering_is_byte_identical(board_root: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    shutil.copytree(board_root, again, ignore=shutil.ignore_patterns("site", "README.md"))
    render(again)
    render(again)  # rendering over a rendered board changes nothing either
    rendered = sorted(p.relative_to(board_root) for p in board_root.rglob("*") if p.is_file())
    assert rendered == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    for path in rendered:
        assert (again / path).read_bytes() == (board_root / path).read_bytes(), path


def test_render_out_writes_elsewhere_and_leaves_the_root_untouched(
    board_root: Path, tmp_path: Path
) -> None:
    before = {p: p.read_bytes() for p in board_root.rglob("*") if p.is_file()}
    written = render(board_root, out=tmp_path / "elsewhere")
    assert written[0] == tmp_path / "elsewhere" / "README.md" and written[0].is_file()
    assert written[0].read_bytes() == (board_root / "README.md").read_bytes()
    assert {p: p.read_bytes() for p in board_root.rglob("*") if p.is_file()} == before


def test_render_removes_plots_of_boards_that_are_gone(board_root: Path, tmp_path: Path) -> None:
    root = tmp_path / "boards"
    shutil.copytree(board_root, root)
    shutil.rmtree(root / "sokoban")
    render(root)
    assert sorted(p.name for p in (root / "site").iterdir()) == ["index.html"]
    assert "### sokoban" not in (root / "README.md").read_text("utf-8")


# ------------------------------------------------------------------------------ CLI
def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run ``agentbench-rl leaderboard ARGS`` in this process: exit code, stdout, stderr."""
    with pytest.raises(SystemExit) as exited:
        main(["leaderboard", *args])
    captured = capsys.readouterr()
    return int(exited.value.code or 0), captured.out, captured.err


def test_cli_validate_submit_render(
    base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, "validate", str(base))
    assert code == 0 and out.startswith("valid: sokoban/val, random (test), success ")
    bad = copy_of(base, tmp_path / "bad")
    (bad / "metadata.json").write_text("{")
    code, out, err = run_cli(capsys, "validate", str(bad))
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "error: metadata.json is not valid JSON (line 1, column 2: Expecting property name "
        "enclosed in double quotes)"
    ]
    root = tmp_path / "boards"
    code, _, err = run_cli(capsys, "submit", str(base), "--root", str(root))
    assert code == 0 and err.startswith(f"filed as {root}/sokoban/val/random-test-")
    assert len(stored_submissions(root)) == 1
    code, _, err = run_cli(capsys, "submit", str(base), "--root", str(root))
    assert code == 2 and err.startswith("error: this submission is already on the board as")
    code, _, err = run_cli(capsys, "render", "--root", str(root))
    boards = f"{root}/README.md, {root}/site/index.html, {root}/estimators/README.md"
    written = f"wrote 5 files: {boards}"
    assert code == 0 and err.startswith(written)
    assert (root / "README.md").is_file() and (root / "site" / "index.html").is_file()


def test_serve_answers_with_the_page(board_root: Path) -> None:
    server = make_server(board_root, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with urllib.request.urlopen(site_url(server), timeout=10) as response:
            assert response.read() == (board_root / "site" / "index.html").read_bytes()
        root = f"http://127.0.0.1:{server.server_address[1]}/"
        with urllib.request.urlopen(root, timeout=10) as response:  # / was a 404
            assert response.url.endswith("/site/index.html")
            assert response.read() == (board_root / "site" / "index.html").read_bytes()
    finally:
        server.shutdown()
        server.server_close()


# ------------------------------------------------------------------------------ the repo's board
def test_committed_boards_validate_and_are_rendered_from_their_submissions(
    tmp_path: Path,
) -> None:
    committed = REPO / "leaderboards"
    boards = collect_boards(committed)
    names = {(b.env, b.split): sorted(e.metadata.name for e in b.entries) for b in boards}
    for env in ("sokoban", "visual_sokoban"):
        for split in ("test", "val"):
            assert {"expert", "random"} <= set(names[(env, split)])
    copy = tmp_path / "boards"
    shutil.copytree(committed, copy, ignore=shutil.ignore_patterns("site", "README.md"))
    render(copy)
    for name in ("README.md", "site/index.html"):
        assert (copy / name).read_text("utf-8") == (committed / name).read_text("utf-8"), (
            f"leaderboards/{name} is stale: run agentbench-rl leaderboard render"
        )


# ------------------------------------------------------------------------------ docs and formats
@pytest.mark.parametrize(
    "module",
    ["board", "curves", "plots", "render", "reported", "schema", "serve", "store", "validate"],
)
def test_docstring_examples(module: str) -> None:
    imported = importlib.import_module(f"agentbench_rl.leaderboard.{module}")
    assert doctest.testmod(imported, optionflags=doctest.ELLIPSIS).failed == 0


def test_parquet_episodes_validate_like_csv(base: Path, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    folder = tmp_path / "parquet"
    evaluate(
        EvalConfig(
            env="sokoban", split="val", agent="random", seeds=SEEDS, episodes_format="parquet"
        ),
        folder,
    )
    write_json(folder / "metadata.json", METADATA)
    assert validate_submission(folder).figures == validate_submission(base).figures
