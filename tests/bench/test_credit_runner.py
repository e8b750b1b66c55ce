"""The credit runner against hostile submissions (issue 63, point 1): one test per attack the
probe found, each run the way ``bench credit`` and the estimators board run outside code."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentbench_rl.bench.credit.runner import Candidate, Estimates, estimate_all
from agentbench_rl.bench.credit.sets import STANDARD_SETS, CreditSet, mdp_set

HOSTILE = textwrap.dedent(
    """
    import ctypes, os, socket, subprocess, sys, time
    import numpy as np

    def zeros(batch):
        return np.zeros(len(batch))

    def peek(batch):  # the truth from the caller's frames, as the probe's submission did
        frame = sys._getframe()
        while frame is not None:
            for value in frame.f_locals.values():
                if hasattr(value, "true_advantage"):
                    return value.true_advantage
            frame = frame.f_back
        raise LookupError("no truth in any frame")

    def read_set(batch):
        with open(os.environ["SET_FILE"] if "SET_FILE" in os.environ else SET_FILE, "rb") as f:
            f.read()
        return zeros(batch)

    def read_linked(batch):  # a code-looking name that points at the set
        os.symlink(SET_FILE, "truth.py")
        return zeros(batch)

    def write(batch):
        with open(OUTSIDE, "w") as f:
            f.write("was here")
        return zeros(batch)

    def connect(batch):
        socket.create_connection(("127.0.0.1", 9))
        return zeros(batch)

    def spawn(batch):
        subprocess.Popen(["sleep", "300"])
        return zeros(batch)

    def fork(batch):  # a setsid grandchild that would outlive the limit
        if os.fork() == 0:
            os.setsid()
            time.sleep(300)
        return zeros(batch)

    def c_library(batch):
        ctypes.CDLL(None).getpid()
        return zeros(batch)

    def environment(batch):
        raise RuntimeError("sees " + ",".join(sorted(os.environ)))

    def leave(batch):
        os._exit(3)

    def chatty(batch):
        print("\\x1b[31mmy own line\\x1b[0m")
        print("error line", file=sys.stderr)
        return zeros(batch)
    """
)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("hostile")
    set_file = STANDARD_SETS / "mdp-lucky-rare" / "set.npz"
    source = HOSTILE + f"\nSET_FILE = {str(set_file)!r}\nOUTSIDE = {str(folder / 'x')!r}\n"
    (folder / "hostile.py").write_text(source, "utf-8")
    (folder / "slow_import.py").write_text(
        "import time\ntime.sleep(60)\ndef zeros(batch):\n    return []\n", "utf-8"
    )
    sys.path.insert(0, str(folder))
    yield folder
    sys.path.remove(str(folder))


@pytest.fixture(scope="module")
def credit() -> CreditSet:
    return mdp_set("lucky_rare", tasks=4, group_size=3)


def run(name: str, credit: CreditSet, module: str = "hostile", limit: float = 10.0) -> Estimates:
    return estimate_all(Candidate.parse(f"python:{module}:{name}"), [credit], time_limit=limit)


def problem(found: Estimates, credit: CreditSet) -> str:
    assert credit.name not in found.values
    return found.problems[credit.name]


def test_a_harmless_function_scores(hostile: Path, credit: CreditSet) -> None:
    found = run("zeros", credit)
    assert found.values[credit.name].shape == (len(credit.batch),) and not found.problems


def test_the_child_never_holds_the_truth(hostile: Path, credit: CreditSet) -> None:
    assert "LookupError: no truth in any frame" in problem(run("peek", credit), credit)


@pytest.mark.parametrize("name", ["read_set", "read_linked"])
def test_the_set_files_cannot_be_read(hostile: Path, credit: CreditSet, name: str) -> None:
    assert "PermissionError: the credit runner refuses" in problem(run(name, credit), credit)


def test_nothing_is_written_outside(hostile: Path, credit: CreditSet) -> None:
    assert "refuses writing" in problem(run("write", credit), credit)
    assert not (hostile / "x").exists()


@pytest.mark.parametrize(
    ("name", "event"),
    [
        ("connect", "socket."),
        ("spawn", "subprocess.Popen"),
        ("fork", "os.fork"),
        ("c_library", "ctypes."),
    ],
)
def test_no_socket_process_or_c_call(
    hostile: Path, credit: CreditSet, name: str, event: str
) -> None:
    assert f"the credit runner refuses {event}" in problem(run(name, credit), credit)


def test_no_environment_beyond_what_it_needs(
    hostile: Path, credit: CreditSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTBENCH_TEST_SECRET", "token")
    seen = problem(run("environment", credit), credit)
    assert "AGENTBENCH_TEST_SECRET" not in seen and "PATH" in seen


def test_an_early_exit_is_named_at_once(hostile: Path, credit: CreditSet) -> None:
    started = time.monotonic()
    found = run("leave", credit, limit=60.0)
    assert problem(found, credit) == "the estimator's process exited early (exit code 3)"
    assert time.monotonic() - started < 30.0  # not the time limit's wait


def test_import_time_code_counts_inside_the_limit(hostile: Path, credit: CreditSet) -> None:
    started = time.monotonic()
    found = run("zeros", credit, module="slow_import", limit=1.0)
    assert "ran past the time limit of 1 s" in problem(found, credit)
    assert time.monotonic() - started < 30.0


def test_its_output_is_its_own_lines(
    hostile: Path, credit: CreditSet, capfd: pytest.CaptureFixture[str]
) -> None:
    found = run("chatty", credit)
    assert credit.name in found.values
    assert found.output == ["\\x1b[31mmy own line\\x1b[0m", "error line"]  # escaped
    assert "my own line" not in capfd.readouterr().out


def test_the_whole_process_group_is_gone_after_the_limit(hostile: Path, credit: CreditSet) -> None:
    # even had a grandchild been forked before the hook, the group is killed: no process of the
    # group may remain once estimate_all returns
    (hostile / "sleeper.py").write_text(
        "import time\ndef zeros(batch):\n    time.sleep(300)\n", "utf-8"
    )
    before = {p for p in os.listdir("/proc") if p.isdigit()}
    run("zeros", credit, module="sleeper", limit=1.0)
    after = {p for p in os.listdir("/proc") if p.isdigit()} - before
    sleeping = [p for p in after if b"sleeper" in _cmdline(p) or b"credit.runner" in _cmdline(p)]
    assert not sleeping


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
