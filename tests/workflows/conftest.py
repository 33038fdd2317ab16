"""Fixtures of the workflow tests: a worker running in a background thread."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest

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

    @contextmanager
    def running(functions: list[Any], **options: Any) -> Iterator[Worker]:
        worker = Worker(q, functions, poll_timeout=1.0, **options)
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        try:
            yield worker
        finally:
            worker.stop()
            thread.join(timeout=15)
            assert not thread.is_alive(), "worker did not stop"

    return running
