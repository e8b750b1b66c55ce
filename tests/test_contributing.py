"""CONTRIBUTING.md's walk-throughs: an env and an estimator registered the documented way are
covered by the shared suites without a test of their own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from toys import TOY_ENV, TOY_ESTIMATOR

from agentbench_rl.envs import ENVS
from agentbench_rl.estimators import REGISTRY

TESTS = Path(__file__).resolve().parent
SHARED_SUITES = ("envs/test_env_contract.py", "estimators/test_estimators_properties.py")


def test_toys_registered_in_the_suite_are_covered_by_the_shared_suites() -> None:
    assert TOY_ENV not in ENVS and TOY_ESTIMATOR not in REGISTRY  # only when asked for
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-k", "toy"]
        + [str(TESTS / suite) for suite in SHARED_SUITES],
        capture_output=True,
        text=True,
        env={**os.environ, "AGENTBENCH_TEST_TOYS": "1"},
        cwd=TESTS.parent,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    passed = set(re.findall(r"PASSED \S+::(\w+)\[(\w+)\]", result.stdout))
    env_checks = {
        (name, TOY_ENV)
        for name in dir(__import__("test_env_contract"))
        if name.startswith("test_") and name != "test_bad_reset_option_is_a_clear_value_error"
    }
    assert env_checks <= passed, sorted(env_checks - passed)
    estimator_checks = {
        ("test_permuting_the_rows_permutes_the_advantages", TOY_ESTIMATOR),
        ("test_same_batch_same_advantages_bitwise", TOY_ESTIMATOR),
    }
    assert estimator_checks <= passed, sorted(estimator_checks - passed)
