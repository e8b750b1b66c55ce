"""Hostile submissions: numbers no board can show, invented categories, episodes no env can give,
a run relabelled as another env, forged version fields, huge seed lists, duplicate keys, deep
nesting. Each is refused by ``validate`` with one line; one that got filed anyway is left off the
boards by ``render`` with a warning naming it, and every other board still renders.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from submission_helpers import (
    copy_of,
    episodes_of,
    read_json,
    rejection,
    write_episodes,
    write_json,
)

from agentbench_rl.envs import env_class
from agentbench_rl.harness.config import EvalConfig
from agentbench_rl.harness.evaluate import evaluate
from agentbench_rl.leaderboard.render import render
from agentbench_rl.leaderboard.schema import SubmissionMetadata
from agentbench_rl.leaderboard.store import submit
from agentbench_rl.leaderboard.validate import SubmissionError, validate_submission

METADATA: dict[str, Any] = {
    "name": "random (hostile tests)",
    "estimator": None,
    "training": None,
    "parameters": None,
    "seeds": [0],
    "code_version": "test",
    "contact": "tests",
    "url": None,
}
TRAINED = {**METADATA, "estimator": "grpo", "training": {"iterations": 40, "rollouts": 80}}
HUGE = 10**400
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A valid submission: the random agent on Sokoban val, seed 0 (never modified)."""
    folder = tmp_path_factory.mktemp("hostile") / "base"
    evaluate(EvalConfig(env="sokoban", split="val", agent="random", seeds=[0]), folder)
    write_json(folder / "metadata.json", METADATA)
    return folder


# ------------------------------------------------------------------------------ bounded numbers
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"parameters": HUGE}, "parameters"),
        ({**TRAINED, "training": {"iterations": HUGE, "rollouts": 8}}, "training.iterations"),
        ({**TRAINED, "training": {"iterations": 8, "rollouts": HUGE}}, "training.rollouts"),
    ],
)
def test_numbers_a_board_cannot_show_are_refused(
    base: Path, tmp_path: Path, change: dict[str, Any], field: str
) -> None:
    folder = copy_of(base, tmp_path / "s")
    write_json(folder / "metadata.json", {**METADATA, **change})
    assert rejection(folder).startswith(f"metadata.json: field '{field}': Input should be less")


def test_a_curve_iteration_of_400_digits_is_refused(base: Path, tmp_path: Path) -> None:
    folder = copy_of(base, tmp_path / "s")
    write_json(folder / "metadata.json", TRAINED)
    (folder / "curves.json").write_text('{"0": {"1' + "0" * 400 + '": 0.5}}')
    assert "is not a whole number" in rejection(folder)


def test_render_skips_a_filed_submission_it_cannot_show_and_renders_the_rest(
    base: Path, tmp_path: Path
) -> None:
    root = tmp_path / "boards"
    good = submit(base, root)
    # Filed by an older version that let it through: put on the board by hand.
    bad = root / "sokoban" / "test" / "huge-000000000000"
    shutil.copytree(base, bad)
    write_json(bad / "metadata.json", {**METADATA, "parameters": HUGE})
    skipped: list[str] = []
    render(root, on_skip=skipped.append)
    assert len(skipped) == 1 and skipped[0].startswith("skipped sokoban/test/huge-000000000000: ")
    readme = (root / "README.md").read_text("utf-8")
    assert f"sokoban/val/{good.name}/" in readme and "huge-000000000000" not in readme


def test_render_warns_by_default(base: Path, tmp_path: Path) -> None:
    root = tmp_path / "boards"
    bad = root / "sokoban" / "val" / "broken-000000000000"
    shutil.copytree(base, bad)
    (bad / "summary.json").write_text("[" * 100_000)
    with pytest.warns(UserWarning, match="skipped sokoban/val/broken-000000000000: summary.json"):
        render(root)


# ------------------------------------------------------------------------------ categories
@pytest.mark.parametrize("category", ["legendary", "easy\n| injected | row |", "medium "])
def test_categories_must_be_the_envs_own(base: Path, tmp_path: Path, category: str) -> None:
    folder = copy_of(base, tmp_path / "s")
    episodes = episodes_of(folder)
    episodes.loc[0, "category"] = category
    write_episodes(folder, episodes)
    message = rejection(folder)
    assert message.startswith("episodes.csv line 2: category ")
    assert "of task val-0000 is not the env's" in message


def test_a_category_swapped_for_another_real_one_is_refused(base: Path, tmp_path: Path) -> None:
    folder = copy_of(base, tmp_path / "s")
    episodes = episodes_of(folder)
    swapped = {"easy": "hard", "medium": "easy", "hard": "medium"}
    episodes["category"] = episodes["category"].map(swapped)
    write_episodes(folder, episodes)
    assert "is not the env's" in rejection(folder)


@pytest.fixture(scope="module")
def webshop_reference() -> Path:
    """The random agent's filed reference submission on WebShop test (never modified)."""
    return next((REPO / "leaderboards" / "webshop" / "test").glob("random-*"))


@pytest.mark.parametrize(
    ("forged", "reason"),
    [("toys", "invented"), ("fashion", "test-00001's"), ("garden\n| injected | row |", "")],
)
def test_webshop_categories_must_be_the_goals_own(
    webshop_reference: Path, tmp_path: Path, forged: str, reason: str
) -> None:
    folder = copy_of(webshop_reference, tmp_path / "s")
    episodes = episodes_of(folder)
    # Every seed's row of the task, so the cross-seed check passes and the category check decides.
    rows = episodes["task_id"] == "test-00000"
    assert set(episodes.loc[rows, "category"]) == {"garden"}  # the goal product's (the data's)
    if reason == "test-00001's":
        assert set(episodes.loc[episodes["task_id"] == "test-00001", "category"]) == {forged}
    episodes.loc[rows, "category"] = forged
    write_episodes(folder, episodes)
    message = rejection(folder)
    first = int(episodes.index[rows][0]) + 2  # header line, then rows from line 2
    assert message.startswith(f"episodes.csv line {first}: category ")
    assert message.endswith('of task test-00000 is not the env\'s ("garden")')


def test_an_env_without_a_category_map_gets_its_categories_form_checked(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As an env registered without a manifest of categories (every built-in env has one).
    monkeypatch.setattr(env_class("sokoban"), "task_categories", classmethod(lambda cls, s: None))
    folder = copy_of(base, tmp_path / "s")
    episodes = episodes_of(folder)
    episodes.loc[episodes["task_id"] == "val-0000", "category"] = "easy\n| injected | row |"
    write_episodes(folder, episodes)
    assert rejection(folder) == "episodes.csv line 2: category must be one line of printable text"
    episodes.loc[episodes["task_id"] == "val-0000", "category"] = "invented"
    write_episodes(folder, episodes)
    # Of one line, an unknown category passes the category check: only the figures differ.
    assert rejection(folder).startswith("summary.json: per_category.")


def test_the_webshop_reference_submission_validates(webshop_reference: Path) -> None:
    assert validate_submission(webshop_reference).env == "webshop"


# ------------------------------------------------------------------------------ plausibility
def _edit_row(base: Path, tmp_path: Path, won: bool, **values: Any) -> tuple[Path, int]:
    folder = copy_of(base, tmp_path / "s")
    episodes = episodes_of(folder)
    row = int(episodes.index[episodes["success"] == won][0])
    for column, value in values.items():
        episodes.loc[row, column] = value
    write_episodes(folder, episodes)
    return folder, row


def test_success_in_zero_steps_is_refused(base: Path, tmp_path: Path) -> None:
    folder, row = _edit_row(base, tmp_path, True, steps=0, invalid_actions=0)
    assert rejection(folder) == (
        f"episodes.csv line {row + 2}: implausible episode: success in 0 steps"
    )


def test_steps_past_the_step_limit_are_refused(base: Path, tmp_path: Path) -> None:
    # Sokoban's limit is 15 steps; a failure's return is -0.1 a step (by hand: -1.6 for 16).
    folder, row = _edit_row(base, tmp_path, False, steps=16, **{"return": -1.6})
    assert rejection(folder) == (
        f"episodes.csv line {row + 2}: implausible episode: 16 steps, past the step limit of 15"
    )


@pytest.mark.parametrize(
    ("won", "values"),
    [
        (True, {"return": 0.5}),  # a win's return holds the +1 and +10 bonuses
        (False, {"return": 10.0}),  # a loss cannot hold the solve bonus
        (True, {"score": 0.5}),  # a win scores 1
    ],
)
def test_a_return_or_score_inconsistent_with_the_outcome_is_refused(
    base: Path, tmp_path: Path, won: bool, values: dict[str, Any]
) -> None:
    folder, row = _edit_row(base, tmp_path, won, **values)
    assert rejection(folder).startswith(f"episodes.csv line {row + 2}: implausible episode: ")


# ------------------------------------------------------------------------------ identity fields
def test_sokoban_relabelled_as_visual_sokoban_is_refused(base: Path, tmp_path: Path) -> None:
    folder = copy_of(base, tmp_path / "s")
    config = read_json(folder / "config.json")
    summary = read_json(folder / "summary.json")
    config["env"] = summary["env"] = summary["config"]["env"] = "visual_sokoban"
    write_json(folder / "config.json", config)
    write_json(folder / "summary.json", summary)
    message = rejection(folder)
    assert message.startswith("summary.json: split_checksum ")
    assert message.endswith("for visual_sokoban/val")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("git_commit", "<script>alert(1)</script>"),
        ("git_commit", "1234567"),
        ("git_commit", 7),
        ("package_version", "<script>alert(1)</script>"),
        ("package_version", "0.1.0\n| forged |"),
        ("package_version", None),
        ("agent", "random\n| forged |"),
    ],
)
def test_forged_version_fields_are_refused(
    base: Path, tmp_path: Path, field: str, value: Any
) -> None:
    folder = copy_of(base, tmp_path / "s")
    summary = read_json(folder / "summary.json")
    summary[field] = value
    if field == "agent":
        config = read_json(folder / "config.json")
        config["agent"] = summary["config"]["agent"] = value
        write_json(folder / "config.json", config)
    write_json(folder / "summary.json", summary)
    assert rejection(folder).startswith(f"summary.json: {field} ")


def test_real_version_fields_pass(base: Path, tmp_path: Path) -> None:
    folder = copy_of(base, tmp_path / "s")
    summary = read_json(folder / "summary.json")
    for version, commit in (("0.2.0rc1", "a" * 40), ("1.0.post2+local.3", None)):
        summary["package_version"], summary["git_commit"] = version, commit
        write_json(folder / "summary.json", summary)
        validate_submission(folder)


# ------------------------------------------------------------------------------ seeds
def _metadata_seconds(count: int) -> float:
    seeds = list(range(count))
    start = time.perf_counter()
    SubmissionMetadata.model_validate({**METADATA, "seeds": seeds})
    return time.perf_counter() - start


def test_the_seed_uniqueness_check_is_linear() -> None:
    # Quadratic (list.count per seed) grows 100x from 1,000 to 10,000 seeds, linear 10x; the
    # bound between them leaves room for a noisy machine either way.
    _metadata_seconds(1000)  # warm up
    small = min(_metadata_seconds(1000) for _ in range(3))
    large = min(_metadata_seconds(10_000) for _ in range(3))
    assert large < 40 * max(small, 1e-4)


def test_too_many_or_repeated_seeds_are_named() -> None:
    with pytest.raises(ValueError, match="at most 10000 items"):
        SubmissionMetadata.model_validate({**METADATA, "seeds": list(range(40_000))})
    with pytest.raises(ValueError, match=r"seeds repeat: \[5, 9\]"):
        SubmissionMetadata.model_validate({**METADATA, "seeds": [*range(10), 9, 5]})


# ------------------------------------------------------------------------------ JSON forms
@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        ("curves.json", '{"0": {"10": 0.2, "10": 0.9}}', 'key "10" appears twice'),
        ("metadata.json", '{"name": "a", "name": "b"}', 'key "name" appears twice'),
        ("metadata.json", "[" * 100_000 + "]" * 100_000, "nested deeper than"),
        ("summary.json", '{"a":' * 50_000 + "1" + "}" * 50_000, "nested deeper than"),
    ],
)
def test_bad_json_is_named_in_one_line(
    base: Path, tmp_path: Path, name: str, text: str, problem: str
) -> None:
    folder = copy_of(base, tmp_path / "s")
    write_json(folder / "metadata.json", TRAINED)
    (folder / name).write_text(text)
    message = rejection(folder)
    assert message.startswith(f"{name} is not valid JSON (") and problem in message


def test_curves_json_as_a_folder_and_curves_as_a_file_are_named(base: Path, tmp_path: Path) -> None:
    folder = copy_of(base, tmp_path / "a")
    write_json(folder / "metadata.json", TRAINED)
    (folder / "curves.json").mkdir()
    assert rejection(folder) == "curves.json is a folder, not a JSON file"
    other = copy_of(base, tmp_path / "b")
    write_json(other / "metadata.json", TRAINED)
    (other / "curves").write_text("not a folder")
    assert rejection(other) == "curves must be a folder of seed-<N>/metrics.jsonl"


# ------------------------------------------------------------------------------ table size
def _loading_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any load of the episodes table fail the test: the size check comes first."""
    from agentbench_rl.leaderboard import validate

    def loaded(path: Path) -> Any:
        raise AssertionError(f"{path.name} was loaded before its size was checked")

    monkeypatch.setattr(validate, "read_episode_table", loaded)


def test_a_parquet_file_of_many_rows_is_refused_before_loading(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few megabytes of Parquet can hold millions of identical rows (an attack took 4.3 GB of
    memory with 20M): its footer's row count is checked against the split's 200 tasks x 1
    declared seed first."""
    pyarrow = pytest.importorskip("pyarrow")
    import pyarrow.parquet as parquet

    folder = copy_of(base, tmp_path / "rows")
    episodes = episodes_of(folder)
    many = episodes.loc[[0] * 2_000_000].reset_index(drop=True)
    parquet.write_table(pyarrow.Table.from_pandas(many), folder / "episodes.parquet")
    (folder / "episodes.csv").unlink()
    for name in ("config.json", "summary.json"):
        record = read_json(folder / name)
        config = record.get("config", record)
        config["episodes_format"] = "parquet"
        write_json(folder / name, record)
    assert (folder / "episodes.parquet").stat().st_size < 3_000_000
    _loading_refused(monkeypatch)
    message = rejection(folder)
    assert "holds 2,000,000 rows, more than 200" in message and "before loading" in message


def test_an_episodes_csv_too_large_for_its_rows_is_refused_before_loading(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = copy_of(base, tmp_path / "bytes")
    episodes = episodes_of(folder)
    episodes.loc[0, "task_id"] = "x" * 300_000  # 200 rows may take at most 201 KiB
    write_episodes(folder, episodes)
    _loading_refused(monkeypatch)
    message = rejection(folder)
    assert "more than 200 episodes of at most 1024 bytes can take" in message


# ------------------------------------------------------------------------------ provenance
def test_forged_provenance_is_shown_as_claimed_never_as_verified(
    base: Path, tmp_path: Path
) -> None:
    """A 40-zero commit and version 9.9.9 are well-formed, so they validate; the board shows
    them in the claimed column, apart from what it recomputed."""
    folder = copy_of(base, tmp_path / "forged")
    summary = read_json(folder / "summary.json")
    summary["git_commit"], summary["package_version"] = "0" * 40, "9.9.9"
    write_json(folder / "summary.json", summary)
    root = tmp_path / "boards"
    submit(folder, root)
    render(root)
    board = (root / "README.md").read_text()
    header = next(line for line in board.splitlines() if line.startswith("| \\# | entry"))
    assert header.endswith("| 95% threshold | verified | claimed |")
    row = next(line for line in board.splitlines() if "random (hostile tests)" in line)
    verified, claimed = (cell.strip() for cell in row.strip("|").split("|")[-2:])
    assert verified == "figures from the episodes"
    assert claimed == "test; results: agentbench-rl 9.9.9@000000000000"


def test_the_same_episodes_under_a_second_name_are_refused(base: Path, tmp_path: Path) -> None:
    from agentbench_rl.leaderboard.store import submission_id

    root = tmp_path / "boards"
    first = submit(base, root)
    renamed = copy_of(base, tmp_path / "renamed")
    write_json(renamed / "metadata.json", {**METADATA, "name": "zz renamed agent"})
    with pytest.raises(SubmissionError, match="these episodes are on the board already as"):
        submit(renamed, root)
    # filed by hand under its own id (a pull request): the board keeps the folder first in
    # order and names the other
    hand_filed = first.parent / submission_id(validate_submission(renamed))
    shutil.copytree(renamed, hand_filed)
    skipped: list[str] = []
    render(root, on_skip=skipped.append)
    assert skipped == [
        f"skipped sokoban/val/{hand_filed.name}: its episodes are those of "
        f"sokoban/val/{first.name}, filed under another name"
    ]
    assert "zz renamed agent" not in (root / "README.md").read_text()
