"""Fixtures of the task tests: a worker serving the test tasks in a thread."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
from worker_threads import serving

from querator import Querator
from querator.workflows import Worker

from . import app_tasks

RunWorker = Callable[..., AbstractContextManager[Worker]]


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    app_tasks.RAN.clear()
    app_tasks.FAILS_LEFT.clear()
    app_tasks.DEFERRED.clear()
    yield


@pytest.fixture
def run_worker(q: Querator) -> RunWorker:
    """``with run_worker() as worker:`` a Worker serving every test task, in a thread."""

    def running(
        functions: list[Any] | None = None, **options: Any
    ) -> AbstractContextManager[Worker]:
        served = app_tasks.ALL if functions is None else functions
        worker = Worker(q, served, poll_timeout=0.5, scheduler=False, **options)
        return serving(worker, join_timeout=15)

    return running
