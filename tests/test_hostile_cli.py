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
from typing import Any

import pytest
from rich.console import Console

from agentbench_rl.cli import main
from agentbench_rl.core.lock import FolderLock
from agentbench_rl.harness.config import EvalConfig, RunOptions
from agentbench_rl.harness.evaluate import evaluate
from agentbench_rl.harness.report import print_summary
from agentbench_rl.spec.results_folder import JOURNAL_FILE as JOURNAL

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
    boards = f"{root}/README.md, {root}/site/index.html, {root}/estimators/README.md"
    written = f"wrote 5 files: {boards}"
    assert code == 0 and err.startswith(written)


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
    summary.agent = "openai:http://h[/]#[red]m[/red]"
    buffer = io.StringIO()
    print_summary(summary, Console(file=buffer, width=200))
    assert "sokoban / val / openai:http://h[/]#[red]m[/red]: 2 episodes" in buffer.getvalue()


# ------------------------------------------------------------------------------ no traceback
def _training(tmp_path: Path, *overrides: str) -> list[str]:
    return ["train", "--out", str(tmp_path / "run"), "iterations=1", *overrides]


ONE_LINE_REFUSALS = [
    (lambda t: ["eval", "--agent", "random", "--out", str(t / "afile" / "sub")], "cannot be made"),
    (lambda t: ["eval", "--agent", "random", "--out", "/proc/x"], "cannot be made"),
    (lambda t: ["train", "--out", str(t / "afile")], "is a file, not a run folder"),
    (lambda t: ["sweep", str(t / "bad.yaml")], "bad.yaml is not valid YAML (line 2"),
    (lambda t: ["train", "--config", str(t / "bad.yaml")], "bad.yaml is not valid YAML"),
    (lambda t: ["bench", "train", "--config", str(t / "none.yaml")], "none.yaml not found"),
    (lambda t: ["bench", "bipace-epsilon", "--epsilon", "nan"], "epsilon=nan is out of range"),
    (lambda t: ["leaderboard", "render", "--root", str(t / "none")], "does not exist"),
    (
        lambda t: (
            [
                "leaderboard",
                "file-runs",
                "baselines/sokoban-quickstart.yaml",
                "--runs-root",
                str(t / "afile"),
                "--root",
                str(t / "boards"),
            ]
        ),
        "is not a folder (give the sweep's --out)",
    ),
    (
        lambda t: ["eval", "--agent", "python:json:JSONDecodeError", "--out", str(t / "o")],
        "JSONDecodeError() raised TypeError",
    ),
    (
        lambda t: (
            ["eval", "--agent", "random", "--env-option", "max_steps=NaN", "--out", str(t / "o")]
        ),
        "NaN is not a finite number",
    ),
    (
        lambda t: (
            ["eval", "--agent", "random", "--env-option", "max_steps=abc", "--out", str(t / "o")]
        ),
        "max_steps must be a whole number >= 1, got 'abc'",
    ),
    (lambda t: _training(t, "device=cuda:7"), "has no CUDA GPU"),
    (lambda t: _training(t, "learning_rate=inf"), "learning_rate must be a finite number"),
    (lambda t: _training(t, "max_grad_norm=nan"), "max_grad_norm must be a finite number"),
    (lambda t: _training(t, "tiny.heads=3"), "tiny: hidden_size 128 must split into heads 3 heads"),
    (
        lambda t: _training(t, "tiny.hidden_size=0"),
        "tiny.hidden_size must be a whole number >= 1, got 0",
    ),
    (lambda t: _training(t, 'env_kwargs={"x": 1}'), "takes no option 'x'"),
]


@pytest.mark.parametrize(("args", "message"), ONE_LINE_REFUSALS)
def test_bad_paths_files_and_values_are_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: Any, message: str
) -> None:
    (tmp_path / "afile").write_text("a user's file")
    (tmp_path / "bad.yaml").write_text("seed: [1\n")
    assert message in one_error(capsys, *args(tmp_path))
    assert (tmp_path / "afile").read_text() == "a user's file"


@pytest.mark.parametrize(
    "args",
    [
        ["leaderboard", "serve", "--port", "99999"],
        ["leaderboard", "serve", "--port", "-1"],
        ["bench", "envs", "--steps", "0"],
        ["bench", "eval", "--levels", "0"],
        ["bench", "bipace-epsilon", "--batches", "0"],
    ],
)
def test_counts_and_ports_out_of_range_are_usage_errors(
    capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    assert "Invalid value for" in one_error(capsys, *args)


def test_a_taken_port_is_named_with_the_way_out(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_error(capsys, "leaderboard", "serve", "--port", str(port))
    assert f"port {port} on 127.0.0.1 is taken" in line and "--port 0" in line


# ------------------------------------------------------------------------------ worker counts
def test_workers_past_the_maximum_are_refused_before_any_process(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``--workers 100000 --limit 2`` started 157 processes and 7.8 GB and never finished."""
    line = one_error(
        capsys,
        "eval",
        "--agent",
        "random",
        "--workers",
        "100000",
        "--limit",
        "2",
        "--out",
        str(tmp_path / "o"),
    )
    assert "workers must be a whole number <= 64, got 100000" in line
    assert not (tmp_path / "o").exists()


def test_workers_are_never_more_than_the_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two episodes in batches of one make two batches: two worker processes, not eight."""
    import multiprocessing.pool

    from agentbench_rl.harness import evaluate as harness

    started: list[int] = []

    class Context:
        def Pool(self, processes: int, **kwargs: Any) -> Any:  # multiprocessing spells it so
            started.append(processes)
            return multiprocessing.pool.ThreadPool(processes, **kwargs)

    monkeypatch.setattr(harness.multiprocessing, "get_context", lambda method: Context())
    config = EvalConfig(env="sokoban", split="val", agent="random", limit=2)
    summary = evaluate(config, tmp_path / "run", RunOptions(workers=8))
    assert started == [2] and summary.n_episodes == 2


# ------------------------------------------------------------------------------ a full disk
def test_a_full_disk_stops_eval_with_one_line_and_resume_finishes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills as the episodes file is written: one line naming it and the way on; the
    journal kept every episode, so --resume writes the files without playing any again."""
    import errno

    from agentbench_rl.harness import evaluate as harness

    def full(episodes: Any, path: Path) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    out = tmp_path / "run"
    args = ["eval", "--agent", "random", "--split", "val", "--limit", "3", "--out", str(out)]
    monkeypatch.setattr(harness, "write_episodes", full)
    code, _, err = run_cli(capsys, *args)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err
    line = errors[0]
    assert line.startswith(f"error: no space left on the device writing {out}/episodes.csv")
    assert line.endswith("then rerun with --resume (what finished is kept)")
    assert len((out / JOURNAL).read_text().splitlines()) == 3
    monkeypatch.undo()
    code, _, err = run_cli(capsys, *args, "--resume")
    assert code == 0 and "complete: all 3 episodes were done" in err
    fresh = tmp_path / "fresh"
    assert run_cli(capsys, *args[:-1], str(fresh))[0] == 0
    assert (out / "episodes.csv").read_bytes() == (fresh / "episodes.csv").read_bytes()


@pytest.mark.parametrize("command", ["eval", "train", "sweep"])
def test_the_way_on_a_resumable_command_names_is_one_it_takes(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """The line that ends a stopped run tells how to continue it; an option it names must be one
    the command has (a sweep resumes by running it again: it has no --resume)."""
    from agentbench_rl.cli import RESUMABLE_COMMANDS

    code, out, _ = run_cli(capsys, command, "--help")
    assert code == 0
    resume = RESUMABLE_COMMANDS[command]
    assert ("--resume" in resume) == ("--resume" in out)
