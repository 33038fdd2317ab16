"""Fixtures of the workflow tests: a worker running in a background thread."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
from worker_threads import serving

from querator import Querator
from querator.clock import ManualClock
from querator.workflows import Worker

from .flows import CALLS, FAILURES, REPLAYS

RunWorker = Callable[..., AbstractContextManager[Worker]]


@pytest.fixture(autouse=True)
def _reset_counters() -> None:
    CALLS.clear()
    FAILURES.clear()
    REPLAYS.clear()


@pytest.fixture
def run_worker(q: Querator) -> RunWorker:
    """``with run_worker([fns...]) as worker:`` — a Worker served by a thread."""

    def running(functions: list[Any], **options: Any) -> AbstractContextManager[Worker]:
        return serving(Worker(q, functions, poll_timeout=1.0, **options), join_timeout=15)

    return running


@pytest.fixture
def clock(request: pytest.FixtureRequest) -> ManualClock:
    """A manual clock standing at the test module's ``START``."""
    return ManualClock(request.module.START)


@pytest.fixture
def cq(backend_url: str, clock: ManualClock) -> Iterator[Querator]:
    """A client of the store under test reading :func:`clock` (so do its workers)."""
    with Querator(backend_url, clock=clock) as client:
        yield client
