"""Installing benchmark data safely: download, size cap, staging folder, atomic swap.

Every data installer (``agentbench-rl data install alfworld|webshop``) follows one order, so a
bad archive or an interrupted download can never damage a good install:

1. fetch (:func:`download`, capped at ``max_bytes``) and unpack (:func:`copy_capped`, the
   running total capped) into a staging folder beside the target (:func:`staging_folder`);
2. check the staged files against the manifests;
3. only then :func:`swap_in` the staged folder for the installed one (two renames on one file
   system; the previous install is deleted last).

Anything that fails before step 3 removes the staging folder and leaves the target as it was.
Downloads use ``urllib`` from the standard library: one GET per file needs no extra dependency.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from agentbench_rl.core.atomic import current_umask, remove_path

#: Default cap on what one install may write (the full WebShop catalogue is ~1.4 GB unpacked,
#: ALFWorld's game files 344 MB); ``--max-bytes`` raises it.
DEFAULT_MAX_BYTES = 8 * 1024**3
#: The most an archive may unpack to, as a multiple of its own size: ALFWorld's unpacks to 10x
#: (text compresses well); a zip bomb unpacks to thousands of times its size.
MAX_RATIO = 100
#: The slowest a download may go over any ``timeout`` seconds, in bytes per second.
MIN_RATE = 1024
_CHUNK = 1 << 20


class SizeLimitError(ValueError):
    """The data would exceed the install's size cap."""


class DownloadError(ValueError):
    """A download failed (HTTP error, connection refused, truncated body)."""


class ByteBudget:
    """A running total of bytes written by one install, refused past ``limit`` and, when the
    bytes come out of an archive of ``archive_bytes``, past :data:`MAX_RATIO` times its size.

    Example:
        >>> budget = ByteBudget(10, "test")
        >>> budget.spend(6)
        >>> budget.spend(6)
        Traceback (most recent call last):
        ...
        agentbench_rl.envs.install.SizeLimitError: test: more than 10 bytes; stopped ...
        >>> ByteBudget(10**9, "bomb.zip unpacks to", archive_bytes=10).spend(1001)
        Traceback (most recent call last):
        ...
        agentbench_rl.envs.install.SizeLimitError: bomb.zip unpacks to more than 100 times its 10 bytes; ...
    """  # noqa: E501

    def __init__(self, limit: int, label: str, archive_bytes: int | None = None) -> None:
        self.limit, self.label, self.used = limit, label, 0
        self.archive_bytes = archive_bytes

    def spend(self, count: int) -> None:
        """Count ``count`` more bytes; raise :class:`SizeLimitError` past the limit."""
        self.used += count
        if self.used > self.limit:
            raise SizeLimitError(
                f"{self.label}: more than {self.limit:,} bytes; stopped (the previous install "
                "is untouched; pass --max-bytes N if this source is trusted and really that big)"
            )
        if self.archive_bytes is not None and self.used > MAX_RATIO * max(1, self.archive_bytes):
            raise SizeLimitError(
                f"{self.label} more than {MAX_RATIO} times its {self.archive_bytes:,} bytes; "
                "stopped (a compression bomb?); the previous install is untouched"
            )


def install_target(path: Path, what: str) -> Path:
    """The folder an install writes: ``path`` itself, or where a symlink to a folder points (the
    link stays); refused in one line when it exists and is not a folder (a user's file is never
    replaced by an install).

    Example:
        >>> import tempfile
        >>> file = Path(tempfile.mkdtemp()) / "notes.txt"
        >>> _ = file.write_text("mine")
        >>> install_target(file, "--data-dir")
        Traceback (most recent call last):
        ...
        ValueError: --data-dir .../notes.txt is a file, not a folder; choose a folder
    """
    path = Path(path)
    if path.is_symlink():
        if not path.is_dir():
            raise ValueError(f"{what} {path} is a symlink to no folder; choose a folder")
        return path.resolve()
    if path.exists() and not path.is_dir():
        kind = "a file" if path.is_file() else "not a folder"
        raise ValueError(f"{what} {path} is {kind}, not a folder; choose a folder")
    return path


def copy_capped(source: IO[bytes], target: IO[bytes], budget: ByteBudget) -> None:
    """Copy a stream, counting every byte against ``budget`` (headers are never trusted).

    Example:
        >>> import io
        >>> out = io.BytesIO()
        >>> copy_capped(io.BytesIO(b"abc"), out, ByteBudget(5, "x"))
        >>> out.getvalue()
        b'abc'
    """
    while chunk := source.read(_CHUNK):
        budget.spend(len(chunk))
        target.write(chunk)


@contextlib.contextmanager
def staging_folder(target: Path) -> Iterator[Path]:
    """A fresh folder beside ``target`` (same file system), removed on the way out.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> with staging_folder(root / "data") as staged:
        ...     staged.parent == root
        True
        >>> sorted(root.iterdir())
        []
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(target)
    prefix = f".{target.name}.staging-{os.getpid()}-"
    staged = Path(tempfile.mkdtemp(prefix=prefix, dir=target.parent))
    try:
        yield staged
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def _remove_leftovers(target: Path) -> None:
    """Remove the staging and set-aside folders that killed installs of ``target`` left (their
    names carry the installing process's id; those of a live process are left alone)."""
    for kind in ("staging", "previous"):
        for leftover in target.parent.glob(f".{target.name}.{kind}-*"):
            pid = leftover.name.removeprefix(f".{target.name}.{kind}-").split("-")[0]
            if pid.isdigit() and not _alive(int(pid)):
                remove_path(leftover, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def swap_in(staged: Path, target: Path) -> None:
    """Replace ``target`` (a file or folder, present or not) by ``staged``.

    The previous install is renamed aside, the staged one renamed into place, then the previous
    one deleted; should the second rename fail, the previous install is put back.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> (root / "old").mkdir(); (root / "new").mkdir(); _ = (root / "new" / "f").write_text("1")
        >>> swap_in(root / "new", root / "old")
        >>> [p.name for p in root.iterdir()], (root / "old" / "f").read_text()
        (['old'], '1')
    """
    aside = target.with_name(f".{target.name}.previous-{os.getpid()}")
    had_previous = target.exists() or target.is_symlink()
    # the staging folder is private (0700): give it the previous folder's mode, or a new one's
    mode = target.stat().st_mode & 0o7777 if target.is_dir() else 0o777 & ~current_umask()
    if staged.is_dir():
        os.chmod(staged, mode)
    if had_previous:
        os.replace(target, aside)
    try:
        os.replace(staged, target)
    except OSError:
        if had_previous:
            os.replace(aside, target)
        raise
    if had_previous:
        remove_path(aside, ignore_errors=True)


def download(
    url: str,
    destination: Path,
    budget: ByteBudget,
    progress: Callable[[int, int], None] | None = None,
    timeout: float = 60.0,
) -> Path:
    """GET ``url`` into ``destination`` (inside a staging folder), capped by ``budget``.

    A body shorter than its ``Content-Length`` is an error, so a dropped connection never passes
    for a small file, and so is a server that sends less than :data:`MIN_RATE` bytes a second
    over any ``timeout`` seconds (a per-read timeout alone never stops one that drips a byte at
    a time). ``progress(done, total)`` reports bytes (total 0 when unknown).

    Example:
        >>> download("http://127.0.0.1:9/none", Path("/tmp/x"), ByteBudget(1, "d"), timeout=1)
        Traceback (most recent call last):
        ...
        agentbench_rl.envs.install.DownloadError: could not download http://127.0.0.1:9/none: ...
    """
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            total = int(response.headers.get("Content-Length") or 0)
            if total > budget.limit - budget.used:
                budget.spend(total)  # refuse before reading anything
            done = 0
            window_start, window_bytes = time.monotonic(), 0
            with destination.open("wb") as target:
                while chunk := response.read1(_CHUNK):
                    budget.spend(len(chunk))
                    target.write(chunk)
                    done += len(chunk)
                    window_bytes += len(chunk)
                    if progress is not None:
                        progress(done, total)
                    elapsed = time.monotonic() - window_start
                    if elapsed >= timeout:
                        if window_bytes < MIN_RATE * elapsed:
                            raise DownloadError(
                                f"could not download {url}: the server sent {window_bytes:,} "
                                f"bytes in {elapsed:.0f} s (under {MIN_RATE:,} bytes/s)"
                            )
                        window_start, window_bytes = time.monotonic(), 0
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as problem:
        if isinstance(problem, SizeLimitError | DownloadError):
            raise
        reason = getattr(problem, "reason", None) or problem
        if isinstance(problem, urllib.error.HTTPError):
            reason = f"HTTP {problem.code} {problem.reason}"
        raise DownloadError(f"could not download {url}: {reason}") from None
    if total and done != total:
        raise DownloadError(f"could not download {url}: got {done:,} of {total:,} bytes")
    return destination
