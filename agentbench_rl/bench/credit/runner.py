"""Running an estimator on credit sets: the package's own in this process, anyone else's in a
child process that never holds the truth.

``bench credit`` and the estimators board score code they did not write (a
``python:module:function`` or an installed entry point). That code runs in a child process
started for it (``python -I``), which

- **never holds the truth**: it receives each set's batch columns only (written to a private
  folder by the parent; no true advantage, value or standard error) and returns one advantage
  per row over a pipe; the parent checks and scores them;
- **cannot read it either**, nor write, connect or start processes: before the submission's
  module is imported, an audit hook (:pep:`578`, stock CPython, no root) refuses every
  ``open`` of a file that is not code (``.py``, ``.pyc``, extension modules, the standard
  library's own files, package metadata), so ``set.npz``, ``set.json`` and the fidelity
  journals stay shut; every ``open`` for writing; sockets; ``subprocess``, ``os.system``,
  ``fork``, ``exec`` and ``spawn``; signals to other processes; ``ctypes`` (which could call
  the C library past the hook); and the filesystem's changing calls. A refused call raises
  ``PermissionError`` in the submission, which then fails on that set in one line;
- runs under limits: :data:`TIME_LIMIT_S` per set, the submission's import counted in its first
  set's time (the clock starts before the import); its whole process group (``setsid``)
  killed at the limit or at the end; an address-space cap of :data:`MEMORY_LIMIT_BYTES`;
  what it prints captured to a file of at most :data:`OUTPUT_LIMIT_BYTES` and shown as its own
  lines (:attr:`Estimates.output`), never mixed into the results; no environment inherited
  beyond ``PATH``, ``LANG`` and the thread settings; an early exit named at once, with its
  exit code.

What it does **not** guarantee: this is not a sandbox against a determined attacker. The hook
lives in the interpreter the submission runs in: a compiled extension module it ships can call
the operating system directly, and a flaw in CPython's audit coverage would pass. The board
therefore files only reviewed submissions (docs/leaderboards.md), and what the runner stops is
the honest mistake and the casual cheat (reading the caller's frame or the set's files, a hang,
a fork that outlives the limit, a flood of output).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from agentbench_rl.bench.credit.sets import CreditSet, batch_arrays, batch_of
from agentbench_rl.core.batch import StepBatch
from agentbench_rl.core.plugins import import_attribute
from agentbench_rl.core.text import printable
from agentbench_rl.estimators import (
    NAMES,
    EstimatorParams,
    EstimatorResult,
    EstimatorSpec,
    available,
)
from agentbench_rl.spec.assignments import parse_named

#: Seconds one estimator may take on one set in a child.
TIME_LIMIT_S = 30.0
#: The child's address-space cap: 8 GiB, or half the machine's memory where that is less.
MEMORY_LIMIT_BYTES = min(8 * 2**30, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2)
#: The most the child may print (stdout and stderr together); a write past it fails.
OUTPUT_LIMIT_BYTES = 2**20
#: The last lines of the child's output kept for the reader.
SHOWN_LINES = 20
STARTUP_S = 120.0  # the child's own imports (numpy, the package) on a busy machine
_GRACE_S = 2.0  # the pipe and the parent's scheduling, beyond the limit
_HEADER_BYTES = 4096  # the most one answer's header line may take
_NEEDS_HIDDEN = "needs hidden states, which this set does not carry"


@dataclass(frozen=True)
class Candidate:
    """An estimator to score: its label, and either a registry name with parameters (built-in
    or an installed entry point) or a function's spec."""

    label: str
    name: str | None = None  # a registry estimator
    params: EstimatorParams = field(default_factory=dict)
    function: str | None = None  # "python:module:function"

    @classmethod
    def parse(cls, text: str, label: str | None = None) -> Candidate:
        """``name[:key=value,...]`` or ``python:module:function``; ``ValueError`` in one line.
        A built-in's parameters are checked here; an entry point is not loaded here (its
        module is code to run in the child), only looked up by name.

        Example:
            >>> Candidate.parse("gigpo:anchor=state").params
            {'anchor': 'state'}
        """
        label = label or text
        if text.startswith("python:"):
            parts = text.split(":")
            if len(parts) != 3 or not all(parts[1:]):
                raise ValueError(f"estimator '{text}': expected python:module:function")
            return cls(label=label, function=text)
        name, params = parse_named(text)
        if name in NAMES:
            EstimatorSpec(name, params)  # checked before any work
        elif name not in available():
            raise ValueError(f"unknown estimator '{name}' (choose from {', '.join(available())})")
        return cls(label=label, name=name, params=dict(params))

    def runs_here(self) -> bool:
        """Whether it runs in this process: the package's built-in estimators do; other code
        (entry points, functions) runs in a child."""
        return self.name in NAMES

    @property
    def spec(self) -> EstimatorSpec | None:
        """The registry spec (loads an entry point: call it where the code may run)."""
        return EstimatorSpec(self.name, self.params) if self.name is not None else None

    @property
    def needs_hidden(self) -> bool:
        """Whether it reads hidden states (loads an entry point, as :attr:`spec`)."""
        spec = self.spec
        return spec is not None and "hidden" in spec.declaration.needs


class BadAdvantages(ValueError):
    """What an estimator returned is not one finite advantage per row."""


def advantages_of(candidate: Candidate, batch: StepBatch, gamma: float) -> np.ndarray:
    """The candidate's advantages on ``batch`` (a registry estimator that discounts gets
    ``gamma``), checked: one finite float per row."""
    spec = candidate.spec
    if spec is not None:
        params = dict(spec.params)
        if "gamma" in spec.declaration.params:
            params.setdefault("gamma", gamma)
        result: Any = EstimatorSpec(spec.name, params).compute(batch)
    else:
        assert candidate.function is not None
        _, module, attribute = candidate.function.split(":")
        function = import_attribute(module, attribute, f"estimator '{candidate.function}'")
        result = function(batch)
    values = result.advantages if isinstance(result, EstimatorResult) else result
    try:
        values = np.asarray(values, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise BadAdvantages(f"returned {type(values).__name__}, not numbers") from None
    if len(values) != len(batch):
        raise BadAdvantages(f"returned {len(values)} advantages for {len(batch)} rows")
    if not np.all(np.isfinite(values)):
        bad = int(np.flatnonzero(~np.isfinite(values))[0])
        raise BadAdvantages(f"returned {values[bad]} at row {bad} (NaN or infinity)")
    return values


@dataclass
class Estimates:
    """One candidate on a list of sets: its advantages, seconds and problems by set name, and
    the last lines it printed (a child's only)."""

    values: dict[str, np.ndarray] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)
    output: list[str] = field(default_factory=list)


def estimate_all(
    candidate: Candidate,
    sets: Sequence[CreditSet],
    time_limit: float = TIME_LIMIT_S,
    memory: int = MEMORY_LIMIT_BYTES,
) -> Estimates:
    """The candidate's advantages on every set it can read (a set without hidden states is
    left out for an estimator that needs them), each one's seconds, and one problem line per
    set that failed. The package's estimators run here; other code in a child (module
    docstring) under ``time_limit`` per set and ``memory``."""
    if not candidate.runs_here():
        return _in_child(candidate, sets, time_limit, memory)
    found = Estimates()
    for credit in sets:
        if candidate.needs_hidden and credit.hidden is None:
            found.problems[credit.name] = _NEEDS_HIDDEN
            continue
        started = time.perf_counter()
        try:
            found.values[credit.name] = advantages_of(candidate, credit.batch, credit.gamma)
            found.seconds[credit.name] = time.perf_counter() - started
        except ValueError as problem:
            found.problems[credit.name] = str(problem)
    return found


# ------------------------------------------------------------------------------ the parent
class _ChildEnded(Exception):
    """The child closed its end of the pipe (it exited or was killed)."""


class _Answers:
    """The parent's end of the answer pipe: bounded reads, each by a deadline."""

    def __init__(self, descriptor: int) -> None:
        self.descriptor = descriptor
        self.buffer = b""

    def _fill(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([self.descriptor], [], [], remaining)[0]:
            raise TimeoutError
        chunk = os.read(self.descriptor, 1 << 16)
        if not chunk:
            raise _ChildEnded
        self.buffer += chunk

    def header(self, deadline: float) -> dict[str, Any]:
        while b"\n" not in self.buffer[:_HEADER_BYTES]:
            if len(self.buffer) >= _HEADER_BYTES:
                raise ValueError("an answer's header is too long")
            self._fill(deadline)
        line, _, self.buffer = self.buffer.partition(b"\n")
        header = json.loads(line)
        if not isinstance(header, dict):
            raise ValueError("an answer's header is not an object")
        return header

    def values(self, rows: int, deadline: float) -> np.ndarray:
        size = rows * 8
        while len(self.buffer) < size:
            self._fill(deadline)
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return np.frombuffer(data, dtype="<f8").copy()


def _environment(home: str) -> dict[str, str]:
    """What the child inherits: a path for executables, a locale, and the thread settings
    (which change its speed, never its values)."""
    kept = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
    environment = {"PATH": os.defpath, "LANG": "C.UTF-8", "HOME": home}
    environment.update({name: os.environ[name] for name in kept if name in os.environ})
    return environment


#: The child's first lines: its ``sys.path`` is the parent's (so the submission imports as it
#: would here), then :func:`child_main` takes over.
_BOOT = (
    "import json, sys; sys.path[:] = json.load(open(sys.argv[1]))['path']; "
    "from agentbench_rl.bench.credit.runner import child_main; child_main(sys.argv[1])"
)


def _in_child(
    candidate: Candidate, sets: Sequence[CreditSet], time_limit: float, memory: int
) -> Estimates:
    found = Estimates()
    with tempfile.TemporaryDirectory(prefix="agentbench-estimator-") as work:
        folder = Path(work)
        for index, credit in enumerate(sets):
            np.savez(folder / f"{index}.npz", **batch_arrays(credit.batch))  # type: ignore[arg-type]
        order = {
            "path": [os.getcwd(), *sys.path],
            "memory": memory,
            "output": OUTPUT_LIMIT_BYTES,
            "candidate": {
                "label": candidate.label,
                "name": candidate.name,
                "params": candidate.params,
                "function": candidate.function,
            },
            "sets": [
                {"name": credit.name, "gamma": credit.gamma, "file": str(folder / f"{i}.npz")}
                for i, credit in enumerate(sets)
            ],
        }
        (folder / "order.json").write_text(json.dumps(order), "utf-8")
        read_end, write_end = os.pipe()
        with open(folder / "output.txt", "wb") as output:
            child = subprocess.Popen(
                [
                    sys.executable,
                    "-I",
                    "-u",
                    "-c",
                    _BOOT,
                    str(folder / "order.json"),
                    str(write_end),
                ],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                pass_fds=(write_end,),
                env=_environment(work),
                start_new_session=True,  # its own process group, killed whole below
            )
        os.close(write_end)
        try:
            _collect(found, _Answers(read_end), child, sets, time_limit)
        finally:
            os.close(read_end)
            _kill_group(child)
        found.output = _shown_lines(folder / "output.txt")
    for credit in sets:  # what the child never reached
        if credit.name not in found.values and credit.name not in found.problems:
            found.problems[credit.name] = "not reached (an earlier set stopped the estimator)"
    return found


def _collect(
    found: Estimates,
    answers: _Answers,
    child: subprocess.Popen[bytes],
    sets: Sequence[CreditSet],
    time_limit: float,
) -> None:
    """Read the child's answers into ``found``; the first failure of the child itself stops."""
    credit: CreditSet | None = None
    try:
        answers.header(time.monotonic() + STARTUP_S)  # its own imports are done
        for credit in sets:
            started = time.monotonic()
            deadline = started + time_limit + _GRACE_S
            header = answers.header(deadline)
            rows = header.get("rows")
            if header.get("set") != credit.name or not isinstance(rows, int):
                raise ValueError("an answer names another set")
            if header.get("problem") is not None:
                found.problems[credit.name] = printable(str(header["problem"]))[:500]
                continue
            if rows != len(credit.batch):
                raise ValueError("an answer has another length than its set")
            values = answers.values(rows, deadline)
            seconds = time.monotonic() - started
            if seconds > time_limit:
                found.problems[credit.name] = (
                    f"ran past the time limit of {time_limit:.0f} s ({seconds:.0f} s)"
                )
                return
            found.values[credit.name] = values
            found.seconds[credit.name] = float(header.get("seconds", seconds))
    except TimeoutError:
        if credit is None:
            problem = f"its process did not start in {STARTUP_S:.0f} s"
        else:
            problem = f"ran past the time limit of {time_limit:.0f} s"
        _fail_from(found, sets, credit, problem)
    except _ChildEnded:
        code = _exit_code(child)
        _fail_from(found, sets, credit, f"the estimator's process exited early (exit code {code})")
    except (ValueError, UnicodeDecodeError) as problem:  # a garbled answer
        _fail_from(found, sets, credit, f"its process answered garbage ({problem})")


def _fail_from(
    found: Estimates, sets: Sequence[CreditSet], credit: CreditSet | None, problem: str
) -> None:
    """The problem on the set being answered, or on every set when none was reached."""
    for each in sets if credit is None else [credit]:
        found.problems[each.name] = problem


def _exit_code(child: subprocess.Popen[bytes]) -> int | None:
    try:
        return child.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        return None


def _kill_group(child: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def _shown_lines(path: Path) -> list[str]:
    """The child's last lines, control characters escaped (no terminal escapes)."""
    text = path.read_bytes()[-OUTPUT_LIMIT_BYTES:].decode("utf-8", "replace")
    lines = [printable(line)[:300] for line in text.split("\n")]
    return [line for line in lines if line.strip()][-SHOWN_LINES:]


# ------------------------------------------------------------------------------ the child
#: Audit events refused once the submission may run: processes, signals, sockets, ctypes and
#: every call that changes the filesystem (prefixes of the event names).
_REFUSED = (
    "subprocess.",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "os.kill",
    "os.killpg",
    "pty.",
    "socket.",
    "ctypes.",
    "os.remove",
    "os.unlink",
    "os.rename",
    "os.rmdir",
    "os.mkdir",
    "os.symlink",
    "os.link",
    "os.chmod",
    "os.chown",
    "os.truncate",
    "os.utime",
    "shutil.",
    "sys.addaudithook",
)
#: The files a submission may read: code, and what imports read beside it.
_CODE_SUFFIXES = (".py", ".pyc", ".so", ".pth", ".pyi", ".typed")
_WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _readable(path: str) -> bool:
    real = os.path.realpath(path)
    if os.path.isdir(real) or real.endswith(_CODE_SUFFIXES):
        return True
    if any(part.endswith((".dist-info", ".egg-info")) for part in Path(real).parts):
        return True  # package metadata (entry points, versions)
    stdlib = os.path.realpath(os.path.dirname(os.__file__))
    return real.startswith(stdlib + os.sep) and "site-packages" not in real


def _seal() -> None:
    """Install the audit hook (module docstring); it cannot be removed."""

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, _, flags = args
            if isinstance(path, int):
                return  # a descriptor the parent handed over
            if (flags or 0) & _WRITING:
                raise PermissionError(f"the credit runner refuses writing {path}")
            if not _readable(os.fsdecode(path)):
                raise PermissionError(f"the credit runner refuses reading {path}")
        elif event.startswith(_REFUSED):
            raise PermissionError(f"the credit runner refuses {event}")

    sys.addaudithook(hook)


def _limit(memory: int, output: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (output, output))  # Python ignores SIGXFSZ
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _send(answers: BinaryIO, header: dict[str, Any], values: np.ndarray | None = None) -> None:
    answers.write(json.dumps(header).encode() + b"\n")
    if values is not None:
        answers.write(values.astype("<f8").tobytes())
    answers.flush()


def child_main(order_path: str) -> None:  # pragma: no cover - runs in the child process
    """The child: read the order and the batches, seal, then answer set by set."""
    answers = os.fdopen(int(sys.argv[2]), "wb")
    order = json.loads(Path(order_path).read_text("utf-8"))
    sys.dont_write_bytecode = True
    _limit(int(order["memory"]), int(order["output"]))
    candidate = Candidate(**order["candidate"])
    batches = []
    for entry in order["sets"]:
        with np.load(entry["file"], allow_pickle=False) as arrays:
            batches.append((entry["name"], float(entry["gamma"]), batch_of(arrays)))
    _seal()
    _send(answers, {"ready": True})
    for name, gamma, batch in batches:
        started = time.perf_counter()
        problem: str | None = None
        values = None
        try:  # the clock of the first set holds the submission's import
            if batch.hidden is None and candidate.needs_hidden:
                problem = _NEEDS_HIDDEN
            else:
                values = advantages_of(candidate, batch, gamma)
        except MemoryError:
            problem = "ran out of memory"
        except BadAdvantages as failure:
            problem = str(failure)
        except Exception as failure:  # the submission's code: any failure is one line
            problem = f"{type(failure).__name__}: {failure}"
        header = {"set": name, "rows": len(batch), "problem": problem}
        _send(answers, {**header, "seconds": time.perf_counter() - started}, values)
