"""Estimator names appear in code only as configuration (CONTRIBUTING, "Adding an estimator").

Logic that branches on a name (``if estimator == "gigpo"``) or keeps a table per name breaks for
an estimator added later; what differs between estimators belongs in their registry entry or in
data. These tests read the modules' source (string constants outside docstrings) and allow per
module only the named configuration constants listed here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agentbench_rl.estimators import NAMES

PACKAGE = Path(__file__).resolve().parents[1] / "agentbench_rl"


def name_constants(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string constant outside docstrings that is, or starts with, a
    built-in estimator's name followed by nothing, ``:`` or a space."""
    tree = ast.parse(path.read_text("utf-8"))
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
            and id(node) not in docstrings
            and any(node.value.split(":")[0].split(" ")[0] == name for name in NAMES)
        ):
            found.append((node.lineno, node.value))
    return found


@pytest.mark.parametrize("module", ["leaderboard/reported.py"])
def test_no_estimator_name_in_code(module: str) -> None:
    assert name_constants(PACKAGE / module) == []


def test_the_check_sees_a_branch_on_a_name(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text('"""Doc naming gigpo."""\nif x == "gigpo":\n    y = {"rloo": 1}\n')
    assert name_constants(source) == [(2, "gigpo"), (3, "rloo")]
