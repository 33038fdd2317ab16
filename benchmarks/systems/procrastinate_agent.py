"""Procrastinate 3.10 as its documentation runs it: an ``App`` on the psycopg 3
connector, one async task, a worker per consumer process.

Procrastinate fetches one job per statement and has no batch size; the
nearest knob is the worker's ``concurrency`` (jobs in flight per worker), so
"batch b" means ``concurrency=b`` for it. Jobs are kept after success, as
by default.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import procrastinate
from procrastinate.jobs import Status
from procrastinate.types import JSONValue

from benchmarks.systems.base import Agent, Deadline, Received, Span

QUEUE = "bench"
T = TypeVar("T")


class ProcrastinateAgent(Agent):
    """One App (its own psycopg pool) on a private event loop."""

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn)
        self._runner = asyncio.Runner()
        self._on_job: Callable[[float], None] = lambda produced: None
        self.app = procrastinate.App(
            connector=procrastinate.PsycopgConnector(conninfo=dsn, min_size=1, max_size=10)
        )

        @self.app.task(name="bench", queue=QUEUE)
        async def bench(t: float) -> None:
            self._on_job(t)

        self.task = bench
        self._run(self._open())

    async def _open(self) -> None:
        await self.app.open_async()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._runner.run(coro)

    def install(self) -> None:
        self._run(self.app.schema_manager.apply_schema_async())

    def reset(self, queue: str, partitions: int = 1) -> None:
        self._run(self.app.connector.execute_query_async("TRUNCATE procrastinate_jobs CASCADE"))

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
            if size == 1:
                await self.task.defer_async(t=time.time())
            else:
                jobs: list[dict[str, JSONValue]] = [{"t": time.time()} for _ in range(size)]
                await self.task.batch_defer_async(*jobs)
            done += size
            if rate:
                await asyncio.sleep(max(0.0, start + done / rate - time.monotonic()))
        return Span(start, time.monotonic(), done)

    async def _work(self, batch: int, seconds: float | None) -> None:
        worker = self.app.run_worker_async(
            queues=[QUEUE],
            concurrency=batch,
            wait=seconds is not None,
            install_signal_handlers=False,
        )
        if seconds is None:
            await worker
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(worker, timeout=seconds)

    def drain(self, queue: str, batch: int) -> Span:
        done = [0]

        def count(produced: float) -> None:
            done[0] += 1

        self._on_job = count
        start = time.monotonic()
        self._run(self._work(batch, None))
        return Span(start, time.monotonic(), done[0])

    def consume(self, queue: str, batch: int, seconds: float) -> Received:
        result = Received(time.monotonic(), 0.0)

        def record(produced: float) -> None:
            result.samples.append((time.monotonic(), time.time() - produced))

        self._on_job = record
        self._run(self._work(batch, seconds))
        result.count = len(result.samples)
        result.end = time.monotonic()
        return result

    def idle(self, queue: str, seconds: float) -> Span:
        def unexpected(produced: float) -> None:
            raise RuntimeError("idle queue was not empty")

        self._on_job = unexpected
        start = time.monotonic()
        self._run(self._work(1, seconds))
        return Span(start, time.monotonic())

    def lease_latency(self, queue: str, samples: int, seconds: float) -> list[float]:
        return self._run(self._lease_latency(samples, seconds))

    async def _lease_latency(self, samples: int, seconds: float) -> list[float]:
        manager = self.app.job_manager
        worker_id = await manager.register_worker()
        timings: list[float] = []
        deadline = Deadline(seconds)
        while len(timings) < samples and not deadline.passed():
            began = time.perf_counter()
            job = await manager.fetch_job(queues=[QUEUE], worker_id=worker_id)
            timings.append(time.perf_counter() - began)
            if job is not None:
                await manager.finish_job(job, Status.SUCCEEDED, delete_job=False)
        await manager.unregister_worker(worker_id)
        return timings

    def close(self) -> None:
        try:
            self._run(self.app.close_async())
        finally:
            self._runner.close()


def make_agent(dsn: str) -> Agent:
    """The entry point :class:`benchmarks.systems.System` calls."""
    return ProcrastinateAgent(dsn)
