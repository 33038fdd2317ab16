"""docs/concepts.md's code map names every package of the tree and every
top-level module."""

from __future__ import annotations

from pathlib import Path

import querator

ROOT = Path(querator.__file__).parent
MAP = (ROOT.parent / "docs" / "concepts.md").read_text()
SHIMS = {"records.py"}
"""Old paths kept only to re-export what moved (the code map names the new ones)."""


def code_map() -> str:
    start = MAP.index("## Where things live (code map)")
    end = MAP.find("\n## ", start + 1)
    return MAP[start : end if end != -1 else None]


def test_every_package_has_a_row() -> None:
    text = code_map()
    packages = sorted(
        f"`{init.parent.relative_to(ROOT.parent).as_posix()}/"
        for init in ROOT.rglob("__init__.py")
        if init.parent != ROOT
    )
    assert packages
    assert [p for p in packages if p not in text] == []


def test_every_top_level_module_is_named() -> None:
    text = code_map()
    modules = sorted(
        f"querator/{path.name}"
        for path in ROOT.glob("*.py")
        if path.name != "__init__.py" and path.name not in SHIMS
    )
    assert [m for m in modules if m not in text] == []


def test_every_module_of_the_queue_layer_is_named() -> None:
    text = code_map()
    row = next(line for line in text.splitlines() if "`querator/queue/` —" in line)
    modules = sorted(p.name for p in (ROOT / "queue").glob("*.py") if p.name != "__init__.py")
    assert [m for m in modules if f"`{m}`" not in row] == []
