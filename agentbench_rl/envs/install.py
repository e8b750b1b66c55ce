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
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

#: Default cap on what one install may write (the full WebShop catalogue is ~1.4 GB unpacked,
#: ALFWorld's game files 344 MB); ``--max-bytes`` raises it.
DEFAULT_MAX_BYTES = 8 * 1024**3
_CHUNK = 1 << 20


class SizeLimitError(ValueError):
    """The data would exceed the install's size cap."""


class DownloadError(ValueError):
    """A download failed (HTTP error, connection refused, truncated body)."""


class ByteBudget:
    """A running total of bytes written by one install, refused past ``limit``.

    Example:
        >>> budget = ByteBudget(10, "test")
        >>> budget.spend(6)
        >>> budget.spend(6)
        Traceback (most recent call last):
        ...
        agentbench_rl.envs.install.SizeLimitError: test: more than 10 bytes; stopped ...
    """

    def __init__(self, limit: int, label: str) -> None:
        self.limit, self.label, self.used = limit, label, 0

    def spend(self, count: int) -> None:
        """Count ``count`` more bytes; raise :class:`SizeLimitError` past the limit."""
        self.used += count
        if self.used > self.limit:
            raise SizeLimitError(
                f"{self.label}: more than {self.limit:,} bytes; stopped (the previous install "
                "is untouched; pass --max-bytes N if this source is trusted and really that big)"
            )


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
    staged = Path(tempfile.mkdtemp(prefix=f".{target.name}.staging-", dir=target.parent))
    try:
        yield staged
    finally:
        shutil.rmtree(staged, ignore_errors=True)


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
    if had_previous:
        os.replace(target, aside)
    try:
        os.replace(staged, target)
    except OSError:
        if had_previous:
            os.replace(aside, target)
        raise
    if had_previous:
        if aside.is_dir() and not aside.is_symlink():
            shutil.rmtree(aside, ignore_errors=True)
        else:
            aside.unlink(missing_ok=True)


def download(
    url: str,
    destination: Path,
    budget: ByteBudget,
    progress: Callable[[int, int], None] | None = None,
    timeout: float = 60.0,
) -> Path:
    """GET ``url`` into ``destination`` (inside a staging folder), capped by ``budget``.

    A body shorter than its ``Content-Length`` is an error, so a dropped connection never passes
    for a small file. ``progress(done, total)`` reports bytes (total 0 when unknown).

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
            with destination.open("wb") as target:
                while chunk := response.read(_CHUNK):
                    budget.spend(len(chunk))
                    target.write(chunk)
                    done += len(chunk)
                    if progress is not None:
                        progress(done, total)
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as problem:
        if isinstance(problem, SizeLimitError):
            raise
        reason = getattr(problem, "reason", None) or problem
        if isinstance(problem, urllib.error.HTTPError):
            reason = f"HTTP {problem.code} {problem.reason}"
        raise DownloadError(f"could not download {url}: {reason}") from None
    if total and done != total:
        raise DownloadError(f"could not download {url}: got {done:,} of {total:,} bytes")
    return destination
