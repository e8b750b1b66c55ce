"""Hostile input on the command line: rich markup in names, splits and paths, ``--root`` that is
a file, bad results folders, a locked ``--out``, generator settings out of bounds.

Every case ends with exit code 2 and exactly one ``error:`` line that shows the user's text as
typed (markup is neither interpreted nor a crash), or succeeds printing it literally.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from agentbench_rl.cli import main
from agentbench_rl.core.lock import FolderLock
from agentbench_rl.harness.evaluate import JOURNAL, EvalConfig, evaluate
from agentbench_rl.harness.report import print_summary

MARKUP = ("[/]", "[red]x[/red]", "[link=https://evil.example]x[/link]", "[bold")


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run ``agentbench-rl ARGS`` in this process: exit code, stdout, stderr."""
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    captured = capsys.readouterr()
    return int(exited.value.code or 0), captured.out, captured.err


def one_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, out, err = run_cli(capsys, *args)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith("error: ") and "Traceback" not in err
    return lines[0]


# ------------------------------------------------------------------------------ rich markup
@pytest.mark.parametrize("text", MARKUP)
def test_markup_in_an_agent_name_is_shown_as_typed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str
) -> None:
    line = one_error(capsys, "eval", "--agent", text, "--out", str(tmp_path / "o"))
    assert f"'{text}'" in line


@pytest.mark.parametrize("text", MARKUP)
def test_markup_in_a_split_or_env_is_shown_as_typed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str
) -> None:
    assert f"'{text}'" in one_error(capsys, "eval", "--split", text, "--out", str(tmp_path))
    assert f"'{text}'" in one_error(capsys, "eval", "--env", text, "--out", str(tmp_path))


def test_markup_in_an_unknown_option_is_shown_as_typed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert "--frob[/]" in one_error(capsys, "eval", "--frob[/]")


def test_markup_in_an_output_path_is_printed_as_typed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "[/]run [red]x[/red]"
    code, _, err = run_cli(
        capsys, "eval", "--env", "sokoban", "--agent", "expert", "--limit", "2", "--out", str(out)
    )
    assert code == 0 and f"results in {out}/" in err
    assert (out / "summary.json").is_file()


@pytest.fixture(scope="module")
def submission(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cli") / "run"
    evaluate(EvalConfig(env="sokoban", split="val", agent="random", seeds=[0]), folder)
    metadata = {
        "name": "[/]x [red]r[/red] [link=https://evil.example]l[/link]",
        "estimator": None,
        "training": None,
        "parameters": None,
        "seeds": [0],
        "code_version": "[bold",
        "contact": "tests",
        "url": None,
    }
    (folder / "metadata.json").write_text(json.dumps(metadata))
    return folder


def test_markup_in_a_submission_name_is_printed_as_typed(
    capsys: pytest.CaptureFixture[str], submission: Path, tmp_path: Path
) -> None:
    code, out, _ = run_cli(capsys, "leaderboard", "validate", str(submission))
    assert code == 0
    assert out.startswith("valid: sokoban/val, [/]x [red]r[/red] [link=https://evil.example]l")
    root = tmp_path / "[red]boards"
    code, _, err = run_cli(capsys, "leaderboard", "submit", str(submission), "--root", str(root))
    assert code == 0 and err.startswith(f"filed as {root}/sokoban/val/")
    code, _, err = run_cli(capsys, "leaderboard", "render", "--root", str(root))
    assert code == 0 and err.startswith(f"wrote 4 files: {root}/README.md")


def test_render_warnings_show_the_folder_as_typed(
    capsys: pytest.CaptureFixture[str], submission: Path, tmp_path: Path
) -> None:
    root = tmp_path / "boards"
    shutil.copytree(submission, root / "sokoban" / "val" / "[red]edited")
    code, _, err = run_cli(capsys, "leaderboard", "render", "--root", str(root))
    assert code == 0
    assert err.splitlines()[0].startswith("warning: skipped sokoban/val/[red]edited: its files")


# ------------------------------------------------------------------------------ --root as a file
@pytest.mark.parametrize("command", ["render", "submit", "serve"])
def test_root_that_is_a_file_is_named(
    capsys: pytest.CaptureFixture[str], submission: Path, tmp_path: Path, command: str
) -> None:
    root = tmp_path / "leaderboards"
    root.write_text("a file")
    extra = [str(submission)] if command == "submit" else []
    line = one_error(capsys, "leaderboard", command, *extra, "--root", str(root))
    assert line == f"error: --root {root} is a file, not a leaderboards folder"


# ------------------------------------------------------------------------------ results folders
ARGS = ("eval", "--env", "sokoban", "--split", "val", "--agent", "random", "--limit", "3")


def test_a_bad_journal_line_is_one_line_naming_file_and_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    assert run_cli(capsys, *ARGS, "--out", str(out))[0] == 0
    (out / JOURNAL).write_text('{"task_id": "val-0000"}\n')
    (out / "summary.json").unlink()
    line = one_error(capsys, *ARGS, "--out", str(out), "--resume")
    assert line == f"error: {out / JOURNAL} line 1 lacks field 'category'"


def test_a_garbled_config_is_one_line_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.json").write_text('{"env": "sokoban",\n "split": }')
    line = one_error(capsys, *ARGS, "--out", str(out), "--resume")
    assert line.startswith(f"error: {out / 'config.json'} is not valid JSON (line 2, column 11:")


def test_a_locked_out_is_one_line_naming_the_holder(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    out.mkdir()
    with FolderLock(out):
        line = one_error(capsys, *ARGS, "--out", str(out))
    assert line.startswith(f"error: {out} is in use by pid ")


# ------------------------------------------------------------------------------ env options
@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["width=30", "height=30"], "sokoban: room must be 4x4 to 12x12, got 30x30"),
        (["num_boxes=50"], "sokoban: num_boxes must be 1 to 3, got 50"),
        (["width=4", "height=4", "num_boxes=3"], "sokoban: no 4x4 level with 3 boxes solvable"),
        (['width="wide"'], "sokoban: width must be a whole number, got 'wide'"),
    ],
)
def test_generator_settings_out_of_bounds_are_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, options: list[str], message: str
) -> None:
    flags = [part for option in options for part in ("--env-option", option)]
    line = one_error(capsys, *ARGS, *flags, "--out", str(tmp_path / "run"))
    assert message in line


def test_the_summary_table_shows_an_agent_name_as_typed(tmp_path: Path) -> None:
    summary = evaluate(
        EvalConfig(env="sokoban", split="val", agent="expert", limit=2), tmp_path / "run"
    )
    summary["agent"] = "openai:http://h[/]#[red]m[/red]"
    buffer = io.StringIO()
    print_summary(summary, Console(file=buffer, width=200))
    assert "sokoban / val / openai:http://h[/]#[red]m[/red]: 2 episodes" in buffer.getvalue()
