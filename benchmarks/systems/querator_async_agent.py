"""querator from async code: one ``AsyncQuerator`` per process on its own event
loop, the same calls as the sync agent without the sync client's thread hop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from benchmarks.systems.base import Agent, Deadline, Span, stamp
from querator import AsyncQuerator, Item, Leased, QueueSettings
from querator.errors import QueueNotFound, RequestTimeout

T = TypeVar("T")


class QueratorAsyncAgent(Agent):
    """An async client on the database's ``querator`` schema, on a private loop."""

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn)
        self._runner = asyncio.Runner()
        self.q = AsyncQuerator(dsn)
        self._done = asyncio.Event()
        self._holder = self._run(self._start())
        self.client_id = f"bench-{os.getpid()}"

    async def _start(self) -> asyncio.Task[None]:
        """Open the client in a task of its own that lives until close (anyio wants
        the client opened and closed by the same task)."""
        opened = asyncio.Event()

        async def hold() -> None:
            async with self.q:
                opened.set()
                await self._done.wait()

        holder = asyncio.create_task(hold())
        await opened.wait()
        return holder

    async def _stop(self) -> None:
        self._done.set()
        await self._holder

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._runner.run(coro)

    def install(self) -> None:
        """The client creates its schema when it opens."""

    def reset(self, queue: str, partitions: int = 1) -> None:
        self._run(self._reset(queue, partitions))

    async def _reset(self, queue: str, partitions: int) -> None:
        for old in await self.q.list_queues(limit=1000):
            with contextlib.suppress(QueueNotFound):
                await self.q.delete_queue(old.name, force=True)
        await self.q.create_queue(queue, QueueSettings(lease_timeout=30, partitions=partitions))

    def produce(
        self, queue: str, count: int, batch: int, rate: float = 0.0, seconds: float = 0.0
    ) -> Span:
        return self._run(self._produce(queue, count, batch, rate, seconds))

    async def _produce(
        self, queue: str, count: int, batch: int, rate: float, seconds: float
    ) -> Span:
        start = time.monotonic()
        deadline = Deadline(seconds) if seconds else None
        done = 0
        while done < count and not (deadline and deadline.passed()):
            size = min(batch, count - done)
            await self.q.produce(queue, [Item(payload=stamp()) for _ in range(size)])
            done += size
            if rate:
                await asyncio.sleep(max(0.0, start + done / rate - time.monotonic()))
        return Span(start, time.monotonic(), done)

    def drain(self, queue: str, batch: int) -> Span:
        return self._run(self._drain(queue, batch))

    async def _drain(self, queue: str, batch: int) -> Span:
        start = time.monotonic()
        done = 0
        leased: list[Leased] = []
        while True:  # each lease completes the previous batch (one round trip)
            try:
                leased = await self.q.lease(
                    queue, client_id=self.client_id, batch_size=batch, complete=leased
                )
            except RequestTimeout:
                break
            done += len(leased)
        return Span(start, time.monotonic(), done)

    def close(self) -> None:
        try:
            self._run(self._stop())
        finally:
            self._runner.close()


def make_agent(dsn: str) -> Agent:
    """The entry point :class:`benchmarks.systems.System` calls."""
    return QueratorAsyncAgent(dsn)
