"""Cancelling a task not yet started is atomic: a worker that leases the task
while the cancel runs keeps it (the cancel says False), never a task both run
and reported cancelled. On every backend (PostgreSQL and SQLite included)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from polling import wait_for

from querator import Querator, StoredItem
from querator.tasks import TASK_QUEUE

from . import app_tasks
from .app_tasks import noop
from .conftest import RunWorker


def test_a_lease_between_the_cancels_read_and_its_delete_wins(q: Querator) -> None:
    """The cancel reads the item, a worker leases it, then the cancel would
    delete it: it must not (the worker's lease stays good)."""
    handle = noop.defer(q, "raced")
    aq = q.aio
    read = aq.list_items
    leased: list[Any] = []

    async def read_then_lease(
        queue: str, *, partition: int = 0, pivot: str | None = None, limit: int = 100
    ) -> list[StoredItem]:
        found = await read(queue, partition=partition, pivot=pivot, limit=limit)
        leased.extend(await aq.lease(TASK_QUEUE, client_id="worker", timeout=5))
        return found

    aq.list_items = read_then_lease  # type: ignore[method-assign]
    try:
        cancelled = handle.cancel()
    finally:
        del aq.list_items
    assert [item.id for item in leased] == [handle.id]
    assert cancelled is False
    q.complete(TASK_QUEUE, leased)  # the worker's lease was not broken


def test_cancels_racing_a_worker_give_one_outcome_per_task(
    q: Querator, run_worker: RunWorker
) -> None:
    keys = [f"k{n}" for n in range(40)]
    handles = noop.defer_many(q, [((key,), {}) for key in keys])
    with run_worker(concurrency=4), ThreadPoolExecutor(4) as pool:
        cancelled = list(pool.map(lambda handle: handle.cancel(), handles))
        ran_expected = cancelled.count(False)
        wait_for(lambda: len(app_tasks.RAN) >= ran_expected, timeout=30, message="tasks ran")
    ran = [key for _, key in app_tasks.RAN]
    assert len(ran) == len(set(ran)) == ran_expected
    for key, done in zip(keys, cancelled, strict=True):
        assert (key in ran) != done, f"{key}: cancelled={done}, ran={key in ran}"
    assert q.list_items(TASK_QUEUE) == []
