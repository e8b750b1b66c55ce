"""Shared fixtures: where the benchmark data live for tests (and the toy registrations).

ALFWorld and WebShop tests read ``../shared/data`` (beside the checkout), or the folder named by
``AGENTBENCH_SHARED_DATA``. On CI the data must be there, so a missing folder fails instead of
skipping silently.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import tarfile
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
ALFWORLD_ARCHIVE = Path("alfworld") / "json_2.1.1.tar.gz"
VALID_SPLITS = ("valid_seen", "valid_unseen")
TRAIN_SAMPLE = 500  # train games the slow ALFWorld oracle plays


DATA_MISSING = "benchmark data not found"


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One visible line at the end for tests skipped for lack of data (not only with -rs)."""
    reasons = Counter(_skip_reason(report) for report in terminalreporter.stats.get("skipped", []))
    no_data = {reason: n for reason, n in reasons.items() if DATA_MISSING in reason}
    if no_data:
        where = "; ".join(sorted(no_data))
        terminalreporter.write_line(
            f"SKIPPED {sum(no_data.values())} tests for lack of data ({where}): "
            "see 'Benchmark data' in CONTRIBUTING.md",
            yellow=True,
            bold=True,
        )
    others = Counter({reason: n for reason, n in reasons.items() if reason not in no_data})
    if others:  # by reason, most first: 225 verl-agent skips were lumped into one "other" count
        shown = "; ".join(f"{n} {reason}" for reason, n in others.most_common(4))
        rest = sum(others.values()) - sum(n for _, n in others.most_common(4))
        more = f"; {rest} for other reasons" if rest else ""
        terminalreporter.write_line(
            f"skipped {sum(others.values())} other tests: {shown}{more} (pytest -rs lists each)"
        )


if os.environ.get("AGENTBENCH_TEST_TOYS") == "1":
    # tests/test_contributing.py: register a toy env and a toy estimator the documented way,
    # then the shared suites collected below must cover them.
    from toys import register_toys

    register_toys()


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    """The benchmark data folder (``../shared/data`` by default)."""
    path = Path(os.environ.get("AGENTBENCH_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))
    if not path.is_dir():
        message = f"{DATA_MISSING} at {path} (set AGENTBENCH_SHARED_DATA)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def _extract(archive: Path, name: str, wanted: Any) -> Path:
    """The archive's files for which ``wanted(member name)`` holds, extracted once under /tmp.

    The folder is named by ``name`` and the archive's digest, and appears whole or not at all
    (extracted beside it, then renamed), so a killed session leaves nothing half-made.
    """
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()[:16]
    target = Path(tempfile.gettempdir()) / f"agentbench-{name}-{digest}"
    if target.is_dir():
        return target
    staging = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    with tarfile.open(archive) as tar:
        members = [m for m in tar if m.isfile() and wanted(m.name)]
        # The "data" filter (Python >= 3.11.4) refuses anything that would leave the folder.
        safe: dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(staging, members=members, **safe)
    try:
        staging.rename(target)
    except OSError:  # another session got there first
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _extract_valid_splits(archive: Path) -> Path:
    """The valid splits of the archive, extracted once per archive version under /tmp."""
    prefixes = tuple(f"json_2.1.1/{split}/" for split in VALID_SPLITS)
    return _extract(archive, "alfworld", lambda member: member.startswith(prefixes))


def _extract_train_sample(archive: Path) -> tuple[Path, list[str]]:
    """A seeded sample of :data:`TRAIN_SAMPLE` train games (task ids in manifest order)."""
    from agentbench_rl.envs.alfworld.data import load_manifest

    games = load_manifest("train").games
    chosen = sorted(random.Random(0).sample(range(len(games)), TRAIN_SAMPLE))
    task_ids = [games[index].task_id for index in chosen]
    folders = {f"json_2.1.1/train/{task_id}/" for task_id in task_ids}
    # A member's trial folder is its path up to the last slash.
    folder = _extract(
        archive,
        f"alfworld-train{TRAIN_SAMPLE}",
        lambda member: member[: member.rfind("/") + 1] in folders,
    )
    return folder, task_ids


@pytest.fixture(scope="session")
def alfworld_data(shared_data_dir: Path) -> Path:
    """A data folder holding valid_seen and valid_unseen (extracted from the shared archive)."""
    return _extract_valid_splits(shared_data_dir / ALFWORLD_ARCHIVE)


@pytest.fixture(scope="session")
def alfworld_train_sample(shared_data_dir: Path) -> tuple[Path, list[str]]:
    """A data folder holding a seeded sample of train games, and their task ids."""
    return _extract_train_sample(shared_data_dir / ALFWORLD_ARCHIVE)
