"""CHANGELOG.md keeps the Keep a Changelog shape: an Unreleased section first,
known change categories only; work in progress goes to changelog.d/."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CATEGORIES = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def test_the_changelog_has_an_unreleased_section_first() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog\n")
    sections = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert sections[0] == "[Unreleased]"
    assert sections[-1].startswith("[0.1.0] - 2026-11-22")
    kinds = set(re.findall(r"^### (.+)$", text, flags=re.MULTILINE))
    assert kinds <= CATEGORIES, kinds - CATEGORIES
    assert (ROOT / "changelog.d" / "README.md").is_file()
