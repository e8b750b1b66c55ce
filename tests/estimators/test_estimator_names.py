"""Estimator names appear in code only as configuration (CONTRIBUTING, "Adding an estimator").

Logic that branches on a name (``if estimator == "gigpo"``) or keeps a table per name breaks for
an estimator added later; what differs between estimators belongs in their registry entry or in
data. These tests read the modules' source (string constants outside docstrings) and allow per
module only the named configuration constants listed here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from agentbench_rl.estimators import NAMES

PACKAGE = Path(__file__).resolve().parents[2] / "agentbench_rl"
# A built-in estimator's name as a word of its own (any case; "_" separates words: auc_vs_grpo).
NAME_WORD = re.compile(
    "(?<![a-z0-9])(" + "|".join(map(re.escape, NAMES)) + ")(?![a-z0-9])", re.IGNORECASE
)


def name_constants(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string constant outside docstrings and module-level assignments
    (where configuration lives) holding a built-in estimator's name as a word."""
    tree = ast.parse(path.read_text("utf-8"))
    configuration = {
        id(node)
        for statement in tree.body
        if isinstance(statement, ast.Assign | ast.AnnAssign)
        for node in ast.walk(statement)
    }
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings | configuration
            and NAME_WORD.search(node.value)
        ):
            found.append((node.lineno, node.value))
    return found


@pytest.mark.parametrize(
    "module",
    [
        "leaderboard/reported.py",
        "bench/estimators.py",
        "bench/train.py",
        "bench/learning/report.py",
        "bench/learning/bench.py",
    ],
)
def test_no_estimator_name_in_code(module: str) -> None:
    assert name_constants(PACKAGE / module) == []


def test_the_check_sees_a_branch_on_a_name(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        '"""Doc naming gigpo."""\nDEFAULT = "grpo"\nif x == "GiGPO:x":\n'
        '    y = {"auc_vs_rloo": 1, "grpose": 2}\n'
    )
    assert name_constants(source) == [(3, "GiGPO:x"), (4, "auc_vs_rloo")]
