"""A server per module of tests/http_api (a fresh memory store each), and its URL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from http_server import serve


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The base URL of a ``querator serve`` over a memory store, for this module."""
    with serve("memory://") as url:
        yield url
