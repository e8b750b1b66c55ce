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


def loaded_by_name(node: ast.AST) -> list[str]:
    """The modules a node loads by a string: ``importlib.import_module("agentbench_rl.x")`` or
    ``__import__`` with a literal (an f-string counts by its literal head), and a
    ``"agentbench_rl.x.y:attr"`` reference (a registry entry a loader imports)."""
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in ("import_module", "__import__") and node.args:
            first = node.args[0]
            if isinstance(first, ast.JoinedStr) and first.values:
                first = first.values[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                return [first.value.rstrip(".")]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        module, sep, attr = node.value.partition(":")
        if sep and attr.isidentifier() and module.startswith("agentbench_rl."):
            return [module]
    return []


def imports() -> dict[str, set[str]]:
    """module -> the agentbench_rl modules it imports (by a statement, or by name:
    :func:`loaded_by_name`; a name reaching into a module counts as that module)."""
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    found: dict[str, set[str]] = defaultdict(set)
    for module, path in paths.items():
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            targets = loaded_by_name(node)
            if isinstance(node, ast.Import | ast.ImportFrom):
                targets = imported(node, module, path.name == "__init__.py")
            for target in targets:
                while target and target not in paths:  # "a.b.c" of module "a.b": a.b
                    target = target.rpartition(".")[0]
                if target and target != module:
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


def test_every_edge_the_table_allows_is_used() -> None:
    """An allowed import nobody makes is a door left open: the table says what the code does."""
    graph = unit_graph()
    unused = sorted(
        f"{layer} -> {target}"
        for layer, may in allowed_imports().items()
        for target in may
        if target not in graph.get(layer, set())
    )
    assert unused == [], "the layer table allows imports nobody makes:\n" + "\n".join(unused)


def test_an_import_by_name_is_an_edge() -> None:
    call = ast.parse('importlib.import_module("agentbench_rl.harness.config")').body[0]
    assert isinstance(call, ast.Expr)
    assert loaded_by_name(call.value) == ["agentbench_rl.harness.config"]
    fstring = ast.parse('__import__(f"agentbench_rl.bench.{name}")').body[0]
    assert isinstance(fstring, ast.Expr)
    assert loaded_by_name(fstring.value) == ["agentbench_rl.bench"]
    reference = ast.parse('"agentbench_rl.envs.sokoban.env:SokobanEnv"').body[0]
    assert isinstance(reference, ast.Expr)
    assert loaded_by_name(reference.value) == ["agentbench_rl.envs.sokoban.env"]
    group = ast.parse('"agentbench_rl.envs"').body[0]  # an entry-point group's name, not a load
    assert isinstance(group, ast.Expr) and loaded_by_name(group.value) == []


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
