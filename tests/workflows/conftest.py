"""Fixtures of the workflow tests: a worker running in a background thread."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest
from worker_threads import serving

from querator import Querator
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
