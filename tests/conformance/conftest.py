"""Fixtures of the conformance suite on top of tests/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from querator import Querator


@pytest.fixture
def q2(q: Querator, backend_url: str, backend_name: str) -> Iterator[Querator]:
    """A second client on the same store as ``q``.

    A memory:// URL opens a new, separate store each time, so on the memory
    backend the "other client" is ``q`` itself (used from another thread).
    """
    if backend_name == "memory":
        yield q
        return
    with Querator(backend_url) as client:
        yield client


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    """Threads for background calls; joined at teardown so none outlives the test."""
    with ThreadPoolExecutor(max_workers=8) as executor:
        yield executor
