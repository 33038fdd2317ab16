"""No import cycle among querator's modules.

The graph is read from the source with :mod:`ast`: every ``import`` and
``from … import`` of a querator module, wherever it stands (module level,
inside a function, under ``if TYPE_CHECKING:``), is an edge. ``from pkg import
name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``. The
implicit import of a package's ``__init__`` by its submodules is not an edge
(every package with submodules would be a cycle).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import querator

ROOT = Path(querator.__file__).parent

KNOWN: set[frozenset[str]] = set()
"""Cycles known and owned elsewhere: each must still be found exactly, so an
entry goes once its cycle is broken."""


def modules() -> dict[str, Path]:
    """Every querator module by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The querator modules that module ``name`` (at ``path``) imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        for target in targets:
            module = target
            while module and module not in known:
                module = module.rpartition(".")[0]
            if module and module != name:
                yield module


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: set(imported(name, path, known)) for name, path in known.items()}


def test_no_import_cycle_among_querator_modules() -> None:
    found = set(cycles(import_graph()))
    assert found - KNOWN == set(), "import cycles: " + "; ".join(
        " <-> ".join(sorted(cycle)) for cycle in found - KNOWN
    )
    assert KNOWN - found == set(), "a known cycle is gone: delete it from KNOWN"


def test_the_checker_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]


def test_the_graph_sees_imports_under_type_checking_and_in_functions() -> None:
    graph = import_graph()
    # schema.py and statements.py were a cycle through an import under TYPE_CHECKING
    assert (
        "querator.queue.backends.postgres.schema"
        in graph["querator.queue.backends.postgres.statements"]
    )
    # open_backend imports the PostgreSQL backend inside the function
    assert "querator.queue.backends.postgres.backend" in graph["querator.queue.backends"]
