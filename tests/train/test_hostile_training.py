"""Hostile input for training runs: a run folder is held by one process, a refused start or resume
rewrites nothing, and resume checks what it resumes (weights, optimiser and RNG files, the run's
identity, the reference, the metrics journal), refusing in one line naming the file.

Every case here resumed with rc 0 (or lost rows) before the run folder's rules
(``spec/run_folder.py``) were written.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
torch.set_num_threads(1)

from agentbench_rl.core.lock import FolderInUseError, FolderLock  # noqa: E402
from agentbench_rl.spec.run_folder import RunFolder  # noqa: E402
from agentbench_rl.train import ppo  # noqa: E402
from agentbench_rl.train.config import config_from_dict  # noqa: E402

SETTINGS: dict[str, Any] = {
    "env": "sokoban",
    "model": "tiny",
    "estimator": "gigpo",
    "seed": 3,
    "iterations": 2,
    "n_tasks": 2,
    "group_size": 2,
    "max_steps": 3,
    "action_mode": "choose",
    "history_observations": False,
    "instruction": "",
    "learning_rate": 3e-3,
    "val_limit": 1,
    "val_every": 2,
    "checkpoint_every": 1,
    "tiny": {
        "hidden_size": 32,
        "layers": 1,
        "heads": 2,
        "kv_heads": 1,
        "intermediate_size": 64,
        "tokenizer_episodes": 1,
    },
}


def settings(**changes: Any) -> dict[str, Any]:
    return {**json.loads(json.dumps(SETTINGS)), **changes}


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished two-iteration run (checkpoint of iteration 2)."""
    run = tmp_path_factory.mktemp("finished") / "run"
    ppo.train(config_from_dict(SETTINGS), run)
    return run


@pytest.fixture(scope="module")
def foreign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another finished run: GRPO on a wider model (its checkpoint and reference are foreign)."""
    run = tmp_path_factory.mktemp("foreign") / "run"
    other = settings(estimator="grpo", tiny={**SETTINGS["tiny"], "hidden_size": 64})
    ppo.train(config_from_dict(other), run)
    return run


def copy_run(source: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(source, run)
    return run


def snapshot(run: Path) -> dict[str, bytes]:
    """Every file of the run folder but the lock, by relative path."""
    return {
        str(path.relative_to(run)): path.read_bytes()
        for path in sorted(run.rglob("*"))
        if path.is_file() and path.name != ".lock"
    }


def resume_longer(run: Path, **changes: Any) -> list[dict[str, Any]]:
    """Resume the run for one more iteration."""
    return ppo.train(config_from_dict(settings(iterations=3, **changes)), run, resume=True)


def state_of(run: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((run / "checkpoint" / "state.json").read_text())
    return loaded


def edit_state(run: Path, **values: Any) -> None:
    (run / "checkpoint" / "state.json").write_text(json.dumps({**state_of(run), **values}))


def truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def metrics_lines(run: Path) -> list[str]:
    return (run / "metrics.jsonl").read_text().splitlines(keepends=True)


def write_metrics_lines(run: Path, lines: list[str]) -> None:
    (run / "metrics.jsonl").write_text("".join(lines))


POLICY = Path("checkpoint") / "policy"
# (what is done to the finished run, what the one-line refusal says)
REFUSED: list[tuple[str, Callable[[Path], None], str]] = [
    ("flipped weight bytes", lambda r: flip_a_byte(r / POLICY / "model.safetensors"), "damaged"),
    ("zeroed fingerprint", lambda r: edit_state(r, weights="0" * 16), "records 0000000000000000"),
    ("iteration 1000", lambda r: edit_state(r, iteration=1000), "iteration 1000, past this"),
    ("truncated weights", lambda r: truncate(r / POLICY / "model.safetensors"), "damaged"),
    ("empty weights", lambda r: truncate(r / POLICY / "model.safetensors", 0), "damaged"),
    (
        "missing weights",
        lambda r: (r / POLICY / "model.safetensors").unlink(),
        "model.safetensors is missing",
    ),
    (
        "truncated optimizer",
        lambda r: truncate(r / "checkpoint" / "optimizer.pt"),
        "optimizer.pt differs from what checkpoint/state.json records",
    ),
    (
        "garbage rng",
        lambda r: (r / "checkpoint" / "rng.pt").write_bytes(b"garbage"),
        "rng.pt differs from what",
    ),
    (
        "invalid state.json",
        lambda r: (r / "checkpoint" / "state.json").write_text("{oops"),
        "state.json is not valid JSON",
    ),
    (
        "state.json without iteration",
        lambda r: (r / "checkpoint" / "state.json").write_text("{}"),
        "'iteration' must be a whole number",
    ),
    (
        "invalid config.yaml",
        lambda r: (r / "config.yaml").write_text("seed: [1"),
        "config.yaml is not valid YAML",
    ),
    (
        "an emptied config.yaml",  # listed 16 differing keys
        lambda r: (r / "config.yaml").write_text(""),
        "config.yaml is empty: the run's declaration is lost",
    ),
    (
        "config.yaml of another seed",
        lambda r: (r / "config.yaml").write_text(yaml.safe_dump(settings(seed=1))),
        "was trained with a different seed",
    ),
    (
        "a cut metrics file",
        lambda r: write_metrics_lines(r, metrics_lines(r)[:2]),
        "ends at iteration 1 but the checkpoint is of iteration 2",
    ),
    ("an emptied metrics file", lambda r: write_metrics_lines(r, []), "ends at iteration None"),
    ("a deleted metrics file", lambda r: (r / "metrics.jsonl").unlink(), "ends at iteration None"),
    (
        "a lost middle row",
        lambda r: write_metrics_lines(r, [metrics_lines(r)[0], metrics_lines(r)[2]]),
        "metrics.jsonl line 2 is iteration 2, but iteration 1 is missing before it",
    ),
    (
        "a duplicated row",
        lambda r: write_metrics_lines(r, [*metrics_lines(r)[:2], *metrics_lines(r)[1:]]),
        "metrics.jsonl line 3 repeats iteration 1",
    ),
    (
        "a JSON list line",
        lambda r: write_metrics_lines(r, [*metrics_lines(r), "[1, 2]\n"]),
        "metrics.jsonl line 4 is not a JSON object",
    ),
    (
        "a line that is not JSON",
        lambda r: write_metrics_lines(r, ["nope\n", *metrics_lines(r)]),
        "metrics.jsonl line 1 is not valid JSON",
    ),
]


@pytest.mark.parametrize(("edit", "message"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_resume_refuses_what_it_cannot_resume_exactly_and_rewrites_nothing(
    finished: Path, tmp_path: Path, edit: Callable[[Path], None], message: str
) -> None:
    run = copy_run(finished, tmp_path)
    edit(run)
    before = snapshot(run)
    with pytest.raises(ValueError) as refused:
        resume_longer(run)
    text = str(refused.value)
    assert message in text and "\n" not in text
    assert snapshot(run) == before


def test_a_checkpoint_or_reference_of_another_run_is_refused(
    finished: Path, foreign: Path, tmp_path: Path
) -> None:
    run = copy_run(finished, tmp_path / "a")
    shutil.rmtree(run / "checkpoint")
    shutil.copytree(foreign / "checkpoint", run / "checkpoint")
    with pytest.raises(ValueError, match="the checkpoint is of another run"):
        resume_longer(run)

    run = copy_run(finished, tmp_path / "b")
    shutil.rmtree(run / "reference")
    shutil.copytree(foreign / "reference", run / "reference")
    with pytest.raises(ValueError, match="a foreign or damaged reference"):
        resume_longer(run)


def test_a_torn_last_line_is_repaired_and_the_run_goes_on(finished: Path, tmp_path: Path) -> None:
    run = copy_run(finished, tmp_path)
    with open(run / "metrics.jsonl", "a") as stream:
        stream.write('{"iteration": 3, "train/succ')  # killed mid-write
    rows = resume_longer(run)
    assert [row["iteration"] for row in rows] == [0, 1, 2, 3]
    assert RunFolder(run).check_finished().last_iteration == 3
    assert json.loads((run / "done.json").read_text())["iterations"] == 3


def test_rows_after_the_checkpoint_are_redone_once(finished: Path, tmp_path: Path) -> None:
    """A kill between a row and its checkpoint: the row is redone, never kept twice."""
    run = copy_run(finished, tmp_path)
    straight = resume_longer(copy_run(finished, tmp_path / "straight"))
    with open(run / "metrics.jsonl", "a") as stream:
        stream.write(json.dumps({"iteration": 3, "train/success": -1.0}) + "\n")
    (run / "done.json").unlink()  # the extended run had not finished
    rows = resume_longer(run)
    assert ppo.comparable(rows) == ppo.comparable(straight)
    on_disk = RunFolder(run).read_metrics().rows
    assert ppo.comparable(on_disk) == ppo.comparable(straight)


def test_a_failed_start_leaves_nothing_that_blocks_the_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("the model cannot load")

    run = tmp_path / "run"
    with monkeypatch.context() as patch:
        patch.setattr(ppo, "initial_policy", broken)
        with pytest.raises(ValueError, match="the model cannot load"):
            ppo.train(config_from_dict(SETTINGS), run)
    assert not run.exists()  # the folder it made is gone
    run.mkdir()
    (run / "notes.txt").write_text("the user's")
    with monkeypatch.context() as patch:
        patch.setattr(ppo, "initial_policy", broken)
        with pytest.raises(ValueError, match="the model cannot load"):
            ppo.train(config_from_dict(SETTINGS), run)
    assert sorted(p.name for p in run.iterdir()) == ["notes.txt"]  # only the user's file stays
    rows = ppo.train(config_from_dict(SETTINGS), run)  # no --resume needed
    assert [row["iteration"] for row in rows] == [0, 1, 2]


def test_a_failure_before_the_first_new_row_keeps_the_journal(
    finished: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resuming a run killed before its first checkpoint: its rows are only replaced once a new
    row is written (a refused iteration-0 validation leaves them as they were)."""
    run = copy_run(finished, tmp_path)
    shutil.rmtree(run / "checkpoint")
    before = (run / "metrics.jsonl").read_bytes()

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("the validation is refused")

    monkeypatch.setattr(ppo, "validate", refused)
    with pytest.raises(ValueError, match="the validation is refused"):
        resume_longer(run)
    assert (run / "metrics.jsonl").read_bytes() == before


def test_a_second_process_on_a_run_folder_stops_naming_the_holder(
    finished: Path, tmp_path: Path
) -> None:
    run = copy_run(finished, tmp_path)
    before = snapshot(run)
    with FolderLock(run), pytest.raises(FolderInUseError, match=r"is in use by pid \d+"):
        resume_longer(run)
    assert snapshot(run) == before


def test_the_cli_refuses_a_held_run_folder_in_one_line(finished: Path, tmp_path: Path) -> None:
    run = copy_run(finished, tmp_path)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(settings(iterations=3)))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; "
            "from agentbench_rl.core.lock import FolderLock\n"
            "FolderLock(Path(sys.argv[1])).acquire(); print('held', flush=True); time.sleep(60)",
            str(run),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        command = [sys.executable, "-m", "agentbench_rl.cli", "train", "--config", str(config)]
        done = subprocess.run(
            [*command, "--out", str(run), "--resume"], capture_output=True, text=True, timeout=120
        )
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 2  # the CLI's one-line error
    assert "Traceback" not in done.stderr
    assert f"pid {holder.pid}" in done.stderr and "is in use" in done.stderr


def test_a_sweep_stops_at_a_run_another_process_trains(tmp_path: Path) -> None:
    from agentbench_rl.train.sweep import load_sweep, run_sweep

    path = tmp_path / "sweep.yaml"
    base = {key: value for key, value in SETTINGS.items() if key != "seed"}
    sweep_file = {"name": "held", "out": str(tmp_path / "out"), "grid": {"seed": [0]}}
    path.write_text(yaml.safe_dump({**sweep_file, "base": base}))
    sweep = load_sweep(path)
    [run] = sweep.runs()
    held = RunFolder(run.folder).lock()  # as another process training it would
    with held, pytest.raises(FolderInUseError, match="is in use by"):
        run_sweep(sweep, runner="sequential")
    assert not RunFolder(run.folder).holds_run()


# ------------------------------------------------------------------------------ a full disk
def test_a_full_disk_stops_train_with_one_line_and_resume_continues_exactly(
    finished: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """The disk fills while iteration 2's checkpoint is written: one line naming the file and
    the way on, no traceback; once space is back, --resume ends where the run that had room
    ended."""
    import errno

    from agentbench_rl.cli import main

    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(SETTINGS))
    saved = ppo.save_checkpoint

    def full_at_two(run: Any, policy: Any, optimizer: Any, iteration: int, *args: Any) -> None:
        if iteration == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(run.path / "checkpoint"))
        saved(run, policy, optimizer, iteration, *args)

    monkeypatch.setattr(ppo, "save_checkpoint", full_at_two)
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as stopped:
        main(["train", "--config", str(config_file), "--out", str(out)])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert stopped.value.code == 2 and "Traceback" not in err and len(lines) == 1
    assert "no space left on the device writing" in lines[0] and "--resume" in lines[0]
    monkeypatch.setattr(ppo, "save_checkpoint", saved)
    with pytest.raises(SystemExit) as resumed:
        main(["train", "--config", str(config_file), "--out", str(out), "--resume"])
    assert resumed.value.code == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    expected = [json.loads(line) for line in (finished / "metrics.jsonl").read_text().splitlines()]
    assert ppo.comparable(rows) == ppo.comparable(expected)


# ------------------------------------------------------------------------------ odd values
@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("seed=-1", "seed must be a whole number >= 0, got -1"),
        ("seed=4294967296", "seed must be a whole number <= 4294967295, got 4294967296"),
        (
            "iterations=100000000000000000000000",
            "iterations must be a whole number <= 1000000, got 100000000000000000000000",
        ),
        ("env_workers=100000", "env_workers must be a whole number <= 1024, got 100000"),
        ("group_size=1000000", "group_size must be a whole number <= 4096, got 1000000"),
        ("val_seeds=[-3]", "val_seeds.0 must be a whole number >= 0, got -3"),
    ],
)
def test_odd_values_are_refused_before_any_work(
    override: str, message: str, tmp_path: Path, capsys: Any
) -> None:
    from agentbench_rl.cli import main

    with pytest.raises(SystemExit) as stopped:
        main(["train", "--out", str(tmp_path / "run"), override])
    err = capsys.readouterr().err.strip()
    assert stopped.value.code == 2 and err == f"error: {message}"
    assert not (tmp_path / "run").exists()


def test_resume_says_where_it_goes_on(finished: Path, tmp_path: Path, capsys: Any) -> None:
    """From which iteration; and a deleted checkpoint, which retrained from 0 in silence."""
    from rich.console import Console

    run = copy_run(finished, tmp_path)
    console = Console(file=io.StringIO(), width=200)
    ppo.train(config_from_dict(settings(iterations=3)), run, resume=True, console=console)
    said = console.file.getvalue()  # type: ignore[attr-defined]
    assert f"resuming {run} from iteration 2 (its checkpoint)" in said
    shutil.rmtree(run / "checkpoint")
    console = Console(file=io.StringIO(), width=200)
    ppo.train(config_from_dict(settings(iterations=3)), run, resume=True, console=console)
    said = console.file.getvalue()  # type: ignore[attr-defined]
    assert (
        f"--resume: {run} has no checkpoint although its metrics reach iteration 3: training "
        "again from iteration 0"
    ) in said
