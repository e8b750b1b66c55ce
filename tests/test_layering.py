"""The package's layers, read from the code: the subpackages of ``agentbench_rl`` and its top-level
modules import one another along an acyclic graph (directly or through others), and no two
modules import each other. Every import counts, function-local and type-checking ones too: a
cycle they close is a layering fault even where Python would not trip over it.

CONTRIBUTING.md states the order this graph allows; ``test_contributing_states_the_layers`` holds
the two together.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE = REPO_ROOT / "agentbench_rl"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def unit(module: str) -> str:
    """The layer a module belongs to: its subpackage, or itself for a top-level module."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "agentbench_rl"


def imports() -> dict[str, set[str]]:
    """module -> the agentbench_rl modules it imports (``from X import name`` counts as X, or
    X.name where that is a module)."""
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    found: dict[str, set[str]] = defaultdict(set)
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module]
                targets += [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for target in targets:
                if target in modules and target != module:
                    found[module].add(target)
    return found


def unit_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for module, targets in imports().items():
        for target in targets:
            if unit(target) != unit(module) and unit(target) != "agentbench_rl":
                graph[unit(module)].add(unit(target))
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (as the path around it), or ``None``."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_layers_form_an_acyclic_graph() -> None:
    found = cycle(unit_graph())
    assert found is None, f"import cycle between layers: {' -> '.join(found or [])}"


def test_no_two_modules_import_each_other() -> None:
    graph = imports()
    pairs = sorted(
        (a, b) for a, targets in graph.items() for b in targets if a < b and a in graph.get(b, ())
    )
    assert pairs == []


def test_a_cycle_is_found_where_there_is_one() -> None:
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": {"c"}}) is None


def test_contributing_states_the_layers() -> None:
    """CONTRIBUTING's layer list, bottom first, allows every import the code has."""
    text = (REPO_ROOT / "CONTRIBUTING.md").read_text("utf-8")
    match = re.search(r"Layers, bottom first: (.+?)\.\n", text, re.S)
    assert match, "CONTRIBUTING.md has no 'Layers, bottom first: ...' line"
    order = [name.strip(" `\n") for name in re.split(r",|\n", match.group(1)) if name.strip(" `\n")]
    rank = {name: index for index, name in enumerate(order)}
    graph = unit_graph()
    assert sorted(set(graph) | {t for ts in graph.values() for t in ts}) == sorted(rank)
    for source, targets in graph.items():
        for target in targets:
            assert rank[target] < rank[source], f"{source} imports {target}, listed above it"


@pytest.mark.parametrize("module", ["agentbench_rl.prompting", "agentbench_rl.core.lock"])
def test_the_low_layers_import_no_higher_one(module: str) -> None:
    graph = imports()
    assert all(unit(target) in ("core", unit(module)) or target.startswith("agentbench_rl.envs")
               for target in graph.get(module, ()))  # fmt: skip
