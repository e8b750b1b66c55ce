"""The package's layers: CONTRIBUTING.md's table says which layers each layer may import (the
subpackages of ``agentbench_rl``, its top-level modules, and the package's ``__init__`` as the
``agentbench_rl`` layer on top); these tests read that table and every import of the code, and
fail on an import the table does not allow, on a table that allows a cycle, and on two modules
that import each other. Every import counts, function-local, type-checking and relative ones
too: a cycle they close is a layering fault even where Python would not trip over it.
"""

from __future__ import annotations

import ast
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
    """The layer a module belongs to: its subpackage, or itself for a top-level module (the
    package's ``__init__`` is the ``agentbench_rl`` layer)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "agentbench_rl"


def imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The absolute names one import statement of ``module`` reads (a relative import resolved
    against the module's package; ``from X import name`` counts as X and as X.name)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        anchor = package[: len(package) - (node.level - 1)]
        base = ".".join([*anchor, *([base] if base else [])])
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def imports() -> dict[str, set[str]]:
    """module -> the agentbench_rl modules it imports."""
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    found: dict[str, set[str]] = defaultdict(set)
    for module, path in paths.items():
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in imported(node, module, path.name == "__init__.py"):
                    if target in paths and target != module:
                        found[module].add(target)
    return found


def unit_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for module, targets in imports().items():
        for target in targets:
            if unit(target) != unit(module):
                graph[unit(module)].add(unit(target))
    return graph


def allowed_imports() -> dict[str, set[str]]:
    """CONTRIBUTING.md's layer table: layer -> the layers it may import."""
    text = (REPO_ROOT / "CONTRIBUTING.md").read_text("utf-8")
    table = text.split("| layer | what sits there | may import |", 1)
    assert len(table) == 2, "CONTRIBUTING.md has no layer table (| layer | ... | may import |)"
    allowed: dict[str, set[str]] = {}
    for line in table[1].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        layer, may = cells[0].strip("`"), cells[-1].strip(" |")
        allowed[layer] = {name.strip() for name in may.split(",") if name.strip()}
    return allowed


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


def test_every_import_is_one_the_layer_table_allows() -> None:
    allowed = allowed_imports()
    graph = unit_graph()
    layers = set(graph) | {target for targets in graph.values() for target in targets}
    assert layers <= set(allowed), f"layers missing from the table: {sorted(layers - set(allowed))}"
    named = {name for names in allowed.values() for name in names}
    assert named <= set(allowed), f"the table names unknown layers: {sorted(named - set(allowed))}"
    refused = sorted(
        f"{module} imports {target}"
        for module, targets in imports().items()
        for target in targets
        if unit(target) != unit(module) and unit(target) not in allowed[unit(module)]
    )
    assert refused == [], "imports the layer table does not allow:\n" + "\n".join(refused)


def test_the_layer_table_allows_no_cycle() -> None:
    found = cycle(allowed_imports())
    assert found is None, f"the layer table allows a cycle: {' -> '.join(found or [])}"


def test_the_check_reads_relative_imports() -> None:
    node = ast.parse("from ..core import batch").body[0]
    assert isinstance(node, ast.ImportFrom)
    names = imported(node, "agentbench_rl.estimators.gigpo", is_package=False)
    assert names == ["agentbench_rl.core", "agentbench_rl.core.batch"]


@pytest.mark.parametrize("module", ["agentbench_rl.prompting", "agentbench_rl.core.lock"])
def test_the_low_layers_import_no_higher_one(module: str) -> None:
    graph = imports()
    assert all(unit(target) in ("core", unit(module)) or target.startswith("agentbench_rl.envs")
               for target in graph.get(module, ()))  # fmt: skip
