"""Hostile inputs to the results folder: a journal line written twice, two runs on one ``--out``,
killed lock holders, journals and configs that are not what the harness wrote.

Nothing may be counted twice, and every bad file gets one line naming the file and the line.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from agentbench_rl.core.lock import LOCK, FolderInUseError, FolderLock
from agentbench_rl.harness.config import EvalConfig, RunOptions
from agentbench_rl.harness.evaluate import evaluate
from agentbench_rl.spec.journal import read_journal
from agentbench_rl.spec.results_folder import JOURNAL_FILE as JOURNAL

CONFIG = EvalConfig(env="sokoban", split="val", agent="random", seeds=[0, 1], limit=6)
COLUMNS = ("task_id", "category", "seed", "success", "score", "steps", "return", "invalid_actions")


def journal_of(folder: Path) -> list[str]:
    """The journal lines of a finished run (the journal is removed when a run finishes, so they
    are rebuilt from its episodes, in the harness's form)."""
    episodes = pd.read_csv(folder / "episodes.csv", dtype={"task_id": str, "category": str})
    return [json.dumps(row, sort_keys=True) for row in episodes.to_dict("records")]


def interrupted_copy(tmp_path: Path, lines: list[str], text_after: str = "") -> Path:
    """A results folder as a run killed after writing ``lines`` to its journal leaves it."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps(
            {  # CONFIG as a folder written before save_trajectories and categories existed
                "env": "sokoban",
                "split": "val",
                "agent": "random",
                "seeds": [0, 1],
                "limit": 6,
                "max_steps": None,
                "episodes_format": "csv",
                "env_kwargs": {},
            },
            indent=1,
            sort_keys=True,
        )
        + "\n"
    )
    (folder / JOURNAL).write_text("".join(line + "\n" for line in lines) + text_after)
    return folder


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("journal") / "reference"
    evaluate(CONFIG, folder)
    return folder


# ------------------------------------------------------------------------------ counted once
def test_a_duplicated_journal_line_counts_once_with_a_warning(
    reference: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = journal_of(reference)
    folder = interrupted_copy(tmp_path, [*lines[:5], lines[2], *lines[5:8]])
    from rich.console import Console

    summary = evaluate(CONFIG, folder, RunOptions(resume=True), console=Console(stderr=True))
    assert summary.n_episodes == 12  # 6 tasks x 2 seeds, not 13
    assert (folder / "episodes.csv").read_bytes() == (reference / "episodes.csv").read_bytes()
    err = capsys.readouterr().err
    assert "1 episodes were recorded twice; each counts once" in err


def test_the_first_complete_row_is_kept() -> None:
    rows = ['{"task_id": "a", "seed": 0, "x": 1}', '{"task_id": "a", "seed": 0, "x": 2}']
    import tempfile

    path = Path(tempfile.mkdtemp()) / JOURNAL
    path.write_text("\n".join(rows) + "\n")
    journal = read_journal(path, ["task_id", "seed"])
    assert [row["x"] for row in journal.rows] == [1] and journal.duplicates == 1


def test_a_torn_last_line_is_cut_before_the_run_appends(reference: Path, tmp_path: Path) -> None:
    lines = journal_of(reference)
    folder = interrupted_copy(tmp_path, lines[:4], text_after=lines[4][:20])
    evaluate(CONFIG, folder, RunOptions(resume=True))
    assert (folder / "episodes.csv").read_bytes() == (reference / "episodes.csv").read_bytes()


# ------------------------------------------------------------------------------ one writer
def test_a_second_run_on_a_locked_folder_names_the_holder(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    with FolderLock(folder), pytest.raises(FolderInUseError) as caught:
        evaluate(CONFIG, folder)
    message = str(caught.value)
    assert "\n" not in message
    assert f"is in use by pid {os.getpid()} on {socket.gethostname()} since " in message
    assert not (folder / "episodes.csv").exists()


def test_the_lock_is_released_when_the_run_ends(reference: Path) -> None:
    assert not (reference / LOCK).exists()
    with FolderLock(reference):
        pass


def test_the_lock_of_a_killed_run_does_not_block(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path\n"
            "from agentbench_rl.core.lock import FolderLock\n"
            "FolderLock(Path(sys.argv[1])).acquire(); print('held', flush=True); time.sleep(60)",
            str(folder),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(FolderInUseError, match=f"pid {holder.pid} "):
            FolderLock(folder).acquire()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert (folder / LOCK).read_text().startswith(f"pid {holder.pid} ")  # left behind, stale
    summary = evaluate(CONFIG, folder)
    assert summary.n_episodes == 12 and not (folder / LOCK).exists()


# ------------------------------------------------------------------------------ one-line errors
@pytest.mark.parametrize(
    ("bad_line", "problem"),
    [
        ("[1, 2]", "is list, not a JSON object"),
        ('"text"', "is str, not a JSON object"),
        ('{"task_id": "val-0000", "seed": 0}', "lacks field 'category'"),
        ("{oops", "is not valid JSON"),
        ('{"a": 1, "a": 2}', 'key "a" appears twice'),
        ("[" * 5000 + "]" * 5000, "nested deeper than"),
    ],
)
def test_bad_journal_lines_are_named_by_file_and_line(
    reference: Path, tmp_path: Path, bad_line: str, problem: str
) -> None:
    lines = journal_of(reference)
    folder = interrupted_copy(tmp_path, [lines[0], bad_line, lines[1]])
    with pytest.raises(ValueError) as caught:
        evaluate(CONFIG, folder, RunOptions(resume=True))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{folder / JOURNAL} line 2 ")
    assert problem in message


def test_a_journal_that_is_a_folder_is_named(tmp_path: Path) -> None:
    folder = interrupted_copy(tmp_path, [])
    (folder / JOURNAL).unlink()
    (folder / JOURNAL).mkdir()
    with pytest.raises(ValueError, match="is not a file"):
        evaluate(CONFIG, folder, RunOptions(resume=True))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{garbled", "config.json is not valid JSON (line 1, column 2:"),
        ("[1]", "config.json must hold a JSON object"),
        ('{"env": "sokoban", "env": "sokoban"}', 'key "env" appears twice'),
    ],
)
def test_a_garbled_config_is_named(tmp_path: Path, text: str, problem: str) -> None:
    folder = interrupted_copy(tmp_path, [])
    (folder / "config.json").write_text(text)
    with pytest.raises(ValueError) as caught:
        evaluate(CONFIG, folder, RunOptions(resume=True))
    assert "\n" not in str(caught.value) and problem in str(caught.value)
    assert str(folder / "config.json") in str(caught.value)


def test_out_that_is_a_file_is_named(tmp_path: Path) -> None:
    target = tmp_path / "results"
    target.write_text("not a folder")
    with pytest.raises(ValueError, match="is a file, not a results folder"):
        evaluate(CONFIG, target)
