"""Shared fixtures: where the benchmark data live for tests (and the toy registrations).

ALFWorld and WebShop tests read ``../shared/data`` (beside the checkout), or the folder named by
``AGENTBENCH_SHARED_DATA``. On CI the data must be there, so a missing folder fails instead of
skipping silently.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

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
        message = f"benchmark data not found at {path} (set AGENTBENCH_SHARED_DATA)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path
