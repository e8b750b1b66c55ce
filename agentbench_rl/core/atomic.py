"""Files written atomically: a reader never sees half a file, a kill never leaves one."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def current_umask() -> int:
    """The process's file-creation mask (read without changing it where Linux allows).

    Example:
        >>> 0 <= current_umask() <= 0o777
        True
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)  # elsewhere: read it by setting it, and put it back at once
    os.umask(mask)
    return mask


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, fsync it, then rename it over ``path``.

    The file gets the mode a plain ``open`` would give it (0666 less the umask), not the
    temporary file's private 0600, so a web server running as another user can read the boards.

    Example:
        >>> import tempfile, pathlib
        >>> target = pathlib.Path(tempfile.mkdtemp()) / "x.txt"
        >>> atomic_write_bytes(target, b"hello"); target.read_bytes()
        b'hello'
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(handle, 0o666 & ~current_umask())
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """:func:`atomic_write_bytes` for UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"))


def remove_path(path: Path, ignore_errors: bool = False) -> None:
    """Remove ``path`` whatever it is: a folder with its contents (what cannot be removed is
    left where ``ignore_errors``, as ``shutil.rmtree`` does), or a file or symbolic link (a link
    to a folder is removed, never followed); nothing when it does not exist.

    Example:
        >>> import tempfile, pathlib
        >>> folder = pathlib.Path(tempfile.mkdtemp()) / "a"
        >>> (folder / "b").mkdir(parents=True)
        >>> remove_path(folder); remove_path(folder); folder.exists()
        False
    """
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=ignore_errors)
        return
    path.unlink(missing_ok=True)
