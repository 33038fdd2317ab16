"""querator's background tasks as a user runs them: ``@task`` + ``defer``.

A producer defers a no-op task one call at a time (``noop.defer``) or in
batches (``noop.defer_many``: one statement); a consumer is the workflow
``Worker`` serving the task with ``concurrency`` = the batch size, as
``querator worker`` runs it. Fire-and-forget (no result kept), as the peers'
tasks: one produce, one lease and one complete per task.
"""

from __future__ import annotations

import threading
import time

from benchmarks.systems.base import Agent, Span
from querator import Querator, Worker, task
from querator.errors import QueueNotFound
from querator.tasks.deferring import ensure_task_queue

QUEUE = "qbench-tasks"
"""The tasks' queue (one per database; ``reset`` empties it)."""
POLL = 0.05
"""Seconds between the drain's looks at the queue's depth (to know it is done)."""


class Runs:
    """How many no-op tasks this process ran, and when the last one did."""

    count = 0
    last = 0.0


@task(name="qbench.noop", queue=QUEUE)
async def noop(t: float) -> None:
    """The no-op task (``t``: when it was deferred); async, as the peers' are."""
    Runs.count += 1
    Runs.last = time.monotonic()


class QueratorTasksAgent(Agent):
    """A sync client on the database's ``querator`` schema."""

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn)
        self.q = Querator(dsn)

    def install(self) -> None:
        self.q.call(ensure_task_queue, self.q.aio, QUEUE)

    def reset(self, queue: str, partitions: int = 1) -> None:
        try:
            self.q.clear(QUEUE, destructive=True)
        except QueueNotFound:
            self.install()

    def produce(
        self, queue: str, count: int, batch: int, rate: float = 0.0, seconds: float = 0.0
    ) -> Span:
        start = time.monotonic()
        done = 0
        while done < count:
            size = min(batch, count - done)
            if size == 1:
                noop.defer(self.q, time.time())
            else:
                now = time.time()
                noop.defer_many(self.q, [((now,), {})] * size)
            done += size
        return Span(start, time.monotonic(), done)

    def _empty(self) -> bool:
        """Whether the queue holds no item (a probe of at most 2 rows a partition,
        not an exact count of every row: the drain's look costs the store little)."""
        gauges = self.q.gauges(QUEUE, limit=2)
        return all(p.exact and p.depth == 0 for p in gauges.partitions)

    def drain(self, queue: str, batch: int) -> Span:
        Runs.count, Runs.last = 0, time.monotonic()
        worker = Worker(self.q, [noop], concurrency=batch, poll_timeout=1.0, scheduler=False)
        thread = threading.Thread(target=worker.run, daemon=True)
        start = time.monotonic()
        thread.start()
        while not self._empty():
            time.sleep(POLL)
        worker.stop()
        thread.join()
        return Span(start, Runs.last, Runs.count)

    def close(self) -> None:
        self.q.close()


def make_agent(dsn: str) -> Agent:
    """The entry point :class:`benchmarks.systems.System` calls."""
    return QueratorTasksAgent(dsn)
