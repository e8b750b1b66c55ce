"""The results folder while a run writes it: the episode journal and the folder's lock.

The journal (``episodes.partial.jsonl``) is what ``--resume`` reads: one JSON object per finished
episode. Reading it, a torn last line (the process was killed mid-write) is dropped (and cut off
before the run appends again), an episode
recorded twice counts once (the first complete row is kept, with a warning), and any other bad
line is an error naming the file and line: nothing is lost and nothing is counted twice.

The lock (``.lock``) keeps a second run out of a folder that one is writing: it is an exclusive
``flock`` held for the whole run, and the file names its holder (pid, host, start time) so that
the second run can say who. The kernel drops the lock when the holder dies, however it dies, so
a lock left by a killed run never blocks the next one.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

from agentbench_rl.core.jsonfile import json_lines

LOCK = ".lock"
#: The type every journal field must have (``return`` and ``score`` may be written as ints).
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "task_id": (str,),
    "category": (str,),
    "seed": (int,),
    "success": (bool,),
    "score": (int, float),
    "steps": (int,),
    "return": (int, float),
    "invalid_actions": (int,),
}


@dataclass(frozen=True)
class Journal:
    """The episodes a journal holds, in the order they were recorded.

    Attributes:
        rows: one per (seed, task), the first complete one recorded.
        duplicates: how many later rows repeated a (seed, task) and were dropped.
        torn: whether a torn last line was dropped.
        complete_bytes: length of the file up to its last complete line.
    """

    rows: list[dict[str, Any]]
    duplicates: int = 0
    torn: bool = False
    complete_bytes: int = 0

    def append_to(self, path: Path) -> TextIO:
        """Open the journal at ``path`` for appending, after cutting off a torn last line."""
        with open(path, "ab") as stream:
            stream.truncate(self.complete_bytes)
        return open(path, "a", encoding="utf-8")


def _problem(row: Any, columns: Sequence[str]) -> str | None:
    if not isinstance(row, dict):
        return f"is {type(row).__name__}, not a JSON object"
    for column in columns:
        if column not in row:
            return f"lacks field '{column}'"
        kinds = _FIELD_TYPES.get(column, (object,))
        value = row[column]
        if not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool)):
            return f"field '{column}' is {json.dumps(value)}"
    return None


def read_journal(path: Path, columns: Sequence[str]) -> Journal:
    """The episodes of a journal (empty if there is none); ``ValueError`` names a bad line.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "episodes.partial.jsonl"
        >>> _ = path.write_text('{"task_id": "a", "seed": 0}\\n{"task_id": "a", "seed": 0}\\n{"ta')
        >>> journal = read_journal(path, ["task_id", "seed"])
        >>> len(journal.rows), journal.duplicates, journal.torn
        (1, 1, True)
    """
    path = Path(path)
    if not path.exists():
        return Journal([])
    if not path.is_file():
        raise ValueError(f"{path} is not a file (the journal of an interrupted run)")
    data = path.read_bytes()
    complete_bytes = data.rfind(b"\n") + 1
    try:
        text = data[:complete_bytes].decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text") from None
    rows: list[dict[str, Any]] = []
    seen: set[tuple[int, str]] = set()
    duplicates = 0
    for number, row in json_lines(text, str(path)):
        reason = _problem(row, columns)
        if reason:
            raise ValueError(f"{path} line {number} {reason}")
        key = (row["seed"], row["task_id"])
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        rows.append(row)
    # Text after the last newline is a line torn by a kill: its episode is simply run again.
    torn = complete_bytes < len(data)
    return Journal(rows, duplicates, torn, complete_bytes)


class FolderInUseError(ValueError):
    """Another run holds the results folder's lock (a ValueError: that --out is unusable now)."""


class ResultsLock:
    """An exclusive lock on a results folder for the duration of a ``with`` block.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> with ResultsLock(folder):
        ...     try:
        ...         ResultsLock(folder).acquire()
        ...     except FolderInUseError as error:
        ...         print(str(error).split(" is in use")[0] == str(folder))
        True
    """

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / LOCK
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise :class:`FolderInUseError` naming the holder."""
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 500).decode("utf-8", "replace").strip() or "another run"
                os.close(fd)
                raise FolderInUseError(
                    f"{self.path.parent} is in use by {holder}; wait for that run to finish "
                    "or choose another --out"
                ) from None
            # The holder may have removed the file between our open and our lock: retry then.
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        started = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime())
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()} since {started}\n".encode())
        self._fd = fd

    def release(self) -> None:
        """Remove the lock file and drop the lock (idempotent)."""
        if self._fd is None:
            return
        self.path.unlink(missing_ok=True)  # unlinked while still locked: no one can slip in
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> ResultsLock:
        self.acquire()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()
