"""``agentbench-rl data install webshop``: the original data files, from a folder or a URL.

WebShop's ``setup.sh`` downloads ``items_shuffle_1000.json`` and ``items_ins_v2_1000.json`` (the
1k setting every standard split uses), ``items_human_ins.json`` (human goals) and, for the full
setting, ``items_shuffle.json`` and ``items_ins_v2.json``. The source is a folder holding them or
a base URL serving them (``<url>/<name>``); the two 1k files are required, the others are copied
when the source has them. Files are staged beside the data folder, the 1k pair is checked against
the hashes the split manifest pins, and only then is the folder swapped in (the previous install
stays untouched on any failure; files of the folder that are not data files are kept).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentbench_rl.core.hashing import sha256_file
from agentbench_rl.envs.install import (
    DEFAULT_MAX_BYTES,
    ByteBudget,
    DownloadError,
    SizeLimitError,
    copy_capped,
    download,
    install_target,
    staging_folder,
    swap_in,
)
from agentbench_rl.envs.webshop.data import CATALOGUE_FILES, DATA_ENV_VAR, HUMAN_FILES
from agentbench_rl.envs.webshop.world import shipped_manifest

REQUIRED = CATALOGUE_FILES["1k"]
OPTIONAL = (*HUMAN_FILES, *CATALOGUE_FILES["full"])


class InstallError(ValueError):
    """The WebShop files could not be installed; the message names what and why."""


@dataclass(frozen=True)
class WebShopInstall:
    """What :func:`install_webshop` installed.

    Attributes:
        data_dir: the data folder.
        files: the data files installed.
        modified: files whose sha256 differs from the split manifest (installed only when
            allowed).
    """

    data_dir: Path
    files: tuple[str, ...]
    modified: tuple[str, ...]

    def summary(self) -> str:
        """What to print, e.g. ``installed 2 files into /d: ... (sha256 as pinned)``.

        Example:
            >>> WebShopInstall(Path("/d"), ("a.json",), ()).summary()
            'installed 1 files into /d: a.json (the 1k files match the pinned sha256)'
        """
        state = (
            f"modified: {', '.join(self.modified)}"
            if self.modified
            else "the 1k files match the pinned sha256"
        )
        files = ", ".join(self.files)
        return f"installed {len(self.files)} files into {self.data_dir}: {files} ({state})"


def _fetch(source: str, name: str, target: Path, budget: ByteBudget) -> bool:
    """Copy or download ``name`` from ``source`` into ``target``; ``False`` if it has none."""
    if source.startswith(("http://", "https://")):
        try:
            download(f"{source.rstrip('/')}/{name}", target, budget)
        except DownloadError as problem:
            if "HTTP 404" in str(problem):
                return False
            raise
        return True
    path = Path(source).expanduser() / name
    if not path.is_file():
        return False
    with path.open("rb") as stream, target.open("wb") as out:
        copy_capped(stream, out, budget)
    return True


def _keep_other_files(previous: Path, staged: Path, installed: set[str]) -> None:
    """Hard-link (or copy) what the previous folder holds besides data files into ``staged``."""
    if not previous.is_dir():
        return
    for entry in previous.iterdir():
        if entry.name in installed or (staged / entry.name).exists():
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, staged / entry.name, symlinks=True, copy_function=_link)
        else:
            _link(str(entry), str(staged / entry.name))


def _link(source: str, target: str) -> None:
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError:
        shutil.copy2(source, target, follow_symlinks=False)


def install_webshop(
    source: str,
    data_dir: str | os.PathLike[str] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    allow_modified: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> WebShopInstall:
    """Install the WebShop data files from ``source`` (folder or base URL) into ``data_dir``.

    Raises:
        InstallError: no target folder, a required file missing at the source, a download
            failure, the size cap, or (unless ``allow_modified``) a 1k file whose sha256 differs
            from the split manifest's.

    Example:
        >>> install_webshop("/nonexistent", "/tmp/webshop-doc")
        Traceback (most recent call last):
        ...
        agentbench_rl.envs.webshop.install.InstallError: webshop: /nonexistent has no items_...
    """
    if data_dir is None:
        data_dir = os.environ.get(DATA_ENV_VAR) or None
        if data_dir is None:
            raise InstallError(f"webshop: give --data-dir or set ${DATA_ENV_VAR}")
    try:
        target = install_target(Path(data_dir).expanduser(), "--data-dir")
    except ValueError as problem:
        raise InstallError(f"webshop: {problem}") from None
    pinned: dict[str, str] = shipped_manifest()["data_sha256"]
    budget = ByteBudget(max_bytes, f"webshop: {source} holds")
    names = [*REQUIRED, *OPTIONAL]
    try:
        with staging_folder(target) as staged:
            installed: list[str] = []
            for index, name in enumerate(names):
                if progress is not None:
                    progress("fetch", index, len(names))
                if _fetch(source, name, staged / name, budget):
                    installed.append(name)
                elif name in REQUIRED:
                    raise InstallError(f"webshop: {source} has no {name} (a required file)")
            modified = tuple(
                name for name in REQUIRED if sha256_file(staged / name) != pinned.get(name)
            )
            if modified and not allow_modified:
                raise InstallError(
                    f"webshop: {', '.join(modified)} from {source} differ from the sha256 the "
                    "split manifest pins (a catalogue rebuilt from the published index, since "
                    "the original file could not be fetched). If these are the official files, "
                    "install them with --allow-modified-games (results record the data "
                    "fingerprint as not pinned) and report it; the previous install is untouched"
                )
            _keep_other_files(target, staged, set(names))
            swap_in(staged, target)
    except (DownloadError, SizeLimitError) as problem:
        raise InstallError(f"webshop: {problem}") from None
    except OSError as problem:
        raise InstallError(
            f"webshop: cannot write {target} ({problem.strerror or problem})"
        ) from None
    return WebShopInstall(target, tuple(installed), modified)
