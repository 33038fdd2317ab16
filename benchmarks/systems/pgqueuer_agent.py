"""PgQueuer 1.6 as its documentation runs it: a ``QueueManager`` with one
async entrypoint, on an asyncpg connection (PgQueuer's primary driver; its
psycopg driver holds the connection up to 1 s at a time while it watches for
notifications, which stalls a busy consumer).

A consumer is one ``QueueManager.run`` per process: ``mode=drain`` for the
drain scenario, ``continuous`` (woken by its NOTIFY trigger) otherwise.
Completion is PgQueuer's own status-log buffer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any, TypeVar

import asyncpg  # type: ignore[import-untyped]
from pgqueuer import Job, Queries, QueueManager
from pgqueuer.db import AsyncpgDriver
from pgqueuer.domain.types import QueueEntrypoint, QueueExecutionMode
from pgqueuer.ports.repository import EntrypointExecutionParameter

from benchmarks.systems.base import Agent, Deadline, Received, Span, age_of, stamp

ENTRYPOINT = "bench"
T = TypeVar("T")
DEQUEUE_TIMEOUT = timedelta(seconds=30)
"""How long an idle manager waits for a NOTIFY before polling (PgQueuer's default)."""


class PgQueuerAgent(Agent):
    """One psycopg connection on a private event loop."""

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn)
        self._runner = asyncio.Runner()
        self._conn: asyncpg.Connection = self._run(asyncpg.connect(dsn))
        self._queries = Queries(AsyncpgDriver(self._conn))

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._runner.run(coro)

    def install(self) -> None:
        self._run(self._queries.install())

    def reset(self, queue: str, partitions: int = 1) -> None:
        self._run(self._conn.execute("TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics"))

    def produce(
        self, queue: str, count: int, batch: int, rate: float = 0.0, seconds: float = 0.0
    ) -> Span:
        return self._run(self._produce(count, batch, rate, seconds))

    async def _produce(self, count: int, batch: int, rate: float, seconds: float) -> Span:
        start = time.monotonic()
        deadline = Deadline(seconds) if seconds else None
        done = 0
        while done < count and not (deadline and deadline.passed()):
            size = min(batch, count - done)
            payloads: list[bytes | None] = [stamp() for _ in range(size)]
            await self._queries.enqueue([ENTRYPOINT] * size, payloads, [0] * size)
            done += size
            if rate:
                await asyncio.sleep(max(0.0, start + done / rate - time.monotonic()))
        return Span(start, time.monotonic(), done)

    def _manager(self, on_job: Callable[[Job], None]) -> QueueManager:
        manager = QueueManager(self._queries)

        @manager.entrypoint(ENTRYPOINT)
        async def work(job: Job) -> None:
            on_job(job)

        return manager

    def drain(self, queue: str, batch: int) -> Span:
        done = [0]

        def count(job: Job) -> None:
            done[0] += 1

        start = time.monotonic()
        manager = self._manager(count)
        self._run(manager.run(batch_size=batch, mode=QueueExecutionMode.drain))
        return Span(start, time.monotonic(), done[0])

    async def _run_for(self, manager: QueueManager, seconds: float, batch: int) -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(seconds, manager.shutdown.set)
        await manager.run(dequeue_timeout=DEQUEUE_TIMEOUT, batch_size=batch)

    def consume(self, queue: str, batch: int, seconds: float) -> Received:
        result = Received(time.monotonic(), 0.0)

        def record(job: Job) -> None:
            result.samples.append((time.monotonic(), age_of(job.payload or b"")))

        self._run(self._run_for(self._manager(record), seconds, batch))
        result.count = len(result.samples)
        result.end = time.monotonic()
        return result

    def idle(self, queue: str, seconds: float) -> Span:
        start = time.monotonic()

        def unexpected(job: Job) -> None:
            raise RuntimeError("idle queue was not empty")

        self._run(self._run_for(self._manager(unexpected), seconds, 10))
        return Span(start, time.monotonic())

    def lease_latency(self, queue: str, samples: int, seconds: float) -> list[float]:
        return self._run(self._lease_latency(samples, seconds))

    async def _lease_latency(self, samples: int, seconds: float) -> list[float]:
        manager = self._manager(lambda job: None)
        entrypoints = {QueueEntrypoint(ENTRYPOINT): EntrypointExecutionParameter(0)}
        timings: list[float] = []
        deadline = Deadline(seconds)
        while len(timings) < samples and not deadline.passed():
            began = time.perf_counter()
            jobs = await self._queries.dequeue(
                batch_size=1,
                entrypoints=entrypoints,
                queue_manager_id=manager.queue_manager_id,
                global_concurrency_limit=None,
                heartbeat_timeout=timedelta(seconds=30),
            )
            timings.append(time.perf_counter() - began)
            await self._queries.log_jobs([(job, "successful", None) for job in jobs])
        return timings

    def close(self) -> None:
        try:
            self._run(self._conn.close())
        finally:
            self._runner.close()


def make_agent(dsn: str) -> Agent:
    """The entry point :class:`benchmarks.systems.System` calls."""
    return PgQueuerAgent(dsn)
