"""Stores that the test and its worker processes share."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(params=["sqlite", "postgres"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store that other processes can open too."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'limits.db'}"
    return str(request.getfixturevalue("pg_schema_url"))
