"""One process at a time in a folder: the lock of a results folder or a training run.

The lock (``.lock``) keeps a second run out of a folder that one is writing: it is an exclusive
``flock`` held for the whole run, and the file names its holder (pid, host, start time) so that
the second run can say who. The kernel drops the lock when the holder dies, however it dies, so
a lock left by a killed run never blocks the next one.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path
from types import TracebackType

LOCK = ".lock"


class FolderInUseError(ValueError):
    """Another process holds the folder's lock (a ValueError: that --out is unusable now)."""


class FolderLock:
    """An exclusive lock on a run or results folder for the duration of a ``with`` block.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> with FolderLock(folder):
        ...     try:
        ...         FolderLock(folder).acquire()
        ...     except FolderInUseError as error:
        ...         print(str(error).split(" is in use")[0] == str(folder))
        True
    """

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / LOCK
        self._fd: int | None = None

    @classmethod
    def making(cls, folder: Path, kind: str, label: str = "") -> FolderLock:
        """The lock of ``folder``, made first (with its parents) when it is not there; a
        ``ValueError`` in one line, ``label`` first, when a file has its name or it cannot be
        made (``kind`` names what the folder is for).

        Example:
            >>> FolderLock.making(Path(__file__), "results folder", "--out ")
            Traceback (most recent call last):
            ...
            ValueError: --out .../lock.py is a file, not a results folder
        """
        folder = Path(folder)
        if folder.exists() and not folder.is_dir():
            raise ValueError(f"{label}{folder} is a file, not a {kind}")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ValueError(
                f"{label}{folder} cannot be made ({error.strerror or error})"
            ) from None
        return cls(folder)

    def acquire(self) -> None:
        """Take the lock, or raise :class:`FolderInUseError` naming the holder."""
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            except OSError as error:  # a read-only, immutable or vanished folder
                reason = error.strerror or error
                raise ValueError(f"{self.path.parent} cannot be written ({reason})") from None
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

    def __enter__(self) -> FolderLock:
        self.acquire()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()
