"""Workflow, saga, step and task names declared by the test modules are unique
across modules: the registries are process-wide, so two modules declaring one
name would make a combined run (and a worker loading both) serve whichever
was imported last."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).parent
DECORATORS = {"workflow", "saga", "step", "task", "spark_step"}
INTENDED = {
    "t.a": "test_async_and_units declares an impostor of flows' step to test the clash",
}
"""Names declared twice on purpose, with why."""


def declared_names(path: Path) -> set[str]:
    """Names given to ``@workflow``/``@saga``/``@step``/``@task``/``@spark_step``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if called not in DECORATORS:
            continue
        given = [kw.value for kw in node.keywords if kw.arg == "name"] + node.args[:1]
        found.update(
            value.value
            for value in given[:1]
            if isinstance(value, ast.Constant) and isinstance(value.value, str)
        )
    return found


def test_names_scanned_are_found() -> None:
    assert "tel.three" in declared_names(TESTS / "telemetry" / "flows.py")


def test_no_name_is_declared_by_two_test_modules() -> None:
    owners: dict[str, set[str]] = defaultdict(set)
    for path in TESTS.rglob("*.py"):
        for name in declared_names(path):
            owners[name].add(str(path.relative_to(TESTS)))
    shared = {
        name: sorted(paths)
        for name, paths in owners.items()
        if len(paths) > 1 and name not in INTENDED
    }
    assert shared == {}
