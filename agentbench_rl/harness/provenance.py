"""Where a result came from: the package's own commit and whether its tree was dirty, the
versions of the libraries that shape the numbers, and a fingerprint of evaluated weights.

Results (``summary.json``), training metrics and checkpoints record these, so two validations of
one run (different weights, same agent spec and config) can be told apart, and a result made
from uncommitted code says so.
"""

from __future__ import annotations

import json
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any, TypedDict, cast

from agentbench_rl.core.hashing import weights_fingerprint

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # agentbench_rl/
LIBRARIES = ("numpy", "torch", "transformers")


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


#: What a built package (``pip install .``, a wheel) records of its source: ``setup.py`` writes
#: the commit it was built from and whether the tree was dirty.
BUILD_RECORD = "_build.json"
#: What "dirty" looks at: the code that ran (the package and its build files). The boards,
#: docs and recorded runs beside it change no number, so rendering a board or filing a run
#: does not make the next result claim uncommitted code (``setup.py`` spells the same paths).
CODE = ("agentbench_rl", "pyproject.toml", "setup.py")


def package_revision(package_dir: Path = PACKAGE_DIR) -> dict[str, Any]:
    """The commit of the repository the package's source lives in, and whether its tracked
    code (:data:`CODE`) differs from that commit. A package that is not a checkout of its own
    repository (an installed wheel, or a copy inside some other repository, such as a virtual
    environment in the user's project, whose commit says nothing about this code) gives what
    its build recorded (:data:`BUILD_RECORD`), or ``None`` for both when nothing was recorded.

    Example:
        >>> sorted(package_revision())
        ['git_commit', 'git_dirty']
    """
    package_dir = Path(package_dir).resolve()
    unknown = _build_record(package_dir)
    top = _git(["rev-parse", "--show-toplevel"], package_dir)
    if top is None or Path(top).resolve() != package_dir.parent:
        return unknown
    tracked = _git(["ls-files", "--", "__init__.py"], package_dir)
    commit = _git(["rev-parse", "HEAD"], package_dir)
    if not tracked or not commit:
        return unknown
    status = _git(
        ["status", "--porcelain", "--untracked-files=no", "--", *CODE], package_dir.parent
    )
    return {"git_commit": commit, "git_dirty": None if status is None else bool(status)}


def _build_record(package_dir: Path) -> dict[str, Any]:
    """The commit a built package recorded (both ``None`` when none was, or it is unreadable)."""
    try:
        record = json.loads((package_dir / BUILD_RECORD).read_text("utf-8"))
    except (OSError, ValueError):
        record = {}
    commit, dirty = record.get("git_commit"), record.get("git_dirty")
    valid = isinstance(commit, str) and len(commit) == 40 and isinstance(dirty, bool | None)
    return (
        {"git_commit": commit, "git_dirty": dirty}
        if valid
        else {"git_commit": None, "git_dirty": None}
    )


def library_versions() -> dict[str, str | None]:
    """Installed versions of numpy, torch and transformers (``None`` when absent).

    Example:
        >>> sorted(library_versions())
        ['numpy', 'torch', 'transformers']
    """
    versions: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def cpu_model() -> str:
    """The processor's model name (what makes float reductions differ between machines).

    Example:
        >>> isinstance(cpu_model(), str)
        True
    """
    try:
        for line in Path("/proc/cpuinfo").read_text("utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class Machine(TypedDict, total=False):
    """What a bitwise claim about a result depends on (:func:`machine`). Every key may be
    absent from a record read back: older journals and runs kept fewer."""

    cpu: str
    threads: int | None
    numpy: str | None
    torch: str | None
    transformers: str | None
    gpu: str


def machine(threads: int | None = None, gpu: str | None = None) -> Machine:
    """What a bitwise claim about a result depends on: the processor, the library versions,
    the thread count and, where one computed it, the GPU (``docs/training.md``,
    "Reproducibility").

    Example:
        >>> sorted(machine(1)), machine(1, "NVIDIA H200")["gpu"]
        (['cpu', 'numpy', 'threads', 'torch', 'transformers'], 'NVIDIA H200')
    """
    # LIBRARIES is the one list of the libraries recorded (Machine names each for its readers)
    record = cast(Machine, {"cpu": cpu_model(), "threads": threads, **library_versions()})
    if gpu:
        record["gpu"] = gpu
    return record


def agent_weights_fingerprint(agent: str) -> str | None:
    """The weights fingerprint of an ``hf:<local folder>`` agent spec (else ``None``).

    Example:
        >>> agent_weights_fingerprint("random") is None
        True
    """
    if not agent.startswith("hf:"):
        return None
    target = agent.removeprefix("hf:").partition("?")[0]
    return weights_fingerprint(Path(target))


def provenance(agent: str | None = None) -> dict[str, Any]:
    """Everything above in one mapping (what ``summary.json`` records as ``provenance``)."""
    record: dict[str, Any] = {**package_revision(), "versions": library_versions()}
    if agent is not None:
        record["agent_weights"] = agent_weights_fingerprint(agent)
    return record
