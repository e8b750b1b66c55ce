"""The build step that records the commit a package is built from.

``pyproject.toml`` declares the package; this file only adds to setuptools' ``build_py`` the
writing of ``agentbench_rl/_build.json`` (the commit and whether the tree was dirty) into the
built package, so that results made with a non-editable install (``pip install .``, a wheel)
still name their code. It cannot import the package (it runs before it is built), so it asks
git itself, as ``agentbench_rl/harness/provenance.py`` does for a checkout.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def build_record() -> dict[str, object]:
    """The commit of the tree being built and whether its tracked files differ from it (both
    ``None`` outside a git checkout of this repository)."""
    top = _git("rev-parse", "--show-toplevel")
    commit = _git("rev-parse", "HEAD") if top and Path(top).resolve() == ROOT else None
    if commit is None:
        return {"git_commit": None, "git_dirty": None}
    # the code only, as agentbench_rl/harness/provenance.py's CODE: boards and docs change no number
    status = _git(
        "status",
        "--porcelain",
        "--untracked-files=no",
        "--",
        "agentbench_rl",
        "pyproject.toml",
        "setup.py",
    )
    return {"git_commit": commit, "git_dirty": None if status is None else bool(status)}


class BuildWithCommit(build_py):
    """setuptools' ``build_py``, then ``_build.json`` beside the built package's modules."""

    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "agentbench_rl" / "_build.json"
        target.write_text(json.dumps(build_record()) + "\n", "utf-8")


setup(cmdclass={"build_py": BuildWithCommit})
