"""querator as a user runs it: one sync ``Querator`` client per process.

Each consumer process leases with ``q.lease(...)`` and completes with
``q.complete(...)``, exactly as the README shows; waiting consumers long-poll
(``timeout``) and are woken by LISTEN/NOTIFY.
"""

from __future__ import annotations

import contextlib
import os
import time
from concurrent.futures import ThreadPoolExecutor

from benchmarks.systems.base import Agent, Deadline, Received, Span, age_of, stamp
from querator import Item, Querator, QueueSettings
from querator.errors import QueueNotFound, RequestTimeout

WAIT = 30.0
"""The long-poll timeout a worker would use."""


class QueratorAgent(Agent):
    """A sync client on the database's ``querator`` schema."""

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn)
        self.q = Querator(dsn)
        self.client_id = f"bench-{os.getpid()}"

    def install(self) -> None:
        """The client creates its schema when it opens."""

    def reset(self, queue: str, partitions: int = 1) -> None:
        """Drop every queue of the store (left-overs would add to maintenance work),
        then create ``queue``."""
        for old in self.q.list_queues(limit=1000):
            with contextlib.suppress(QueueNotFound):
                self.q.delete_queue(old.name)
        self.q.create_queue(queue, QueueSettings(lease_timeout=30, partitions=partitions))

    def produce(
        self, queue: str, count: int, batch: int, rate: float = 0.0, seconds: float = 0.0
    ) -> Span:
        start = time.monotonic()
        deadline = Deadline(seconds) if seconds else None
        done = 0
        while done < count and not (deadline and deadline.passed()):
            size = min(batch, count - done)
            self.q.produce(queue, [Item(payload=stamp()) for _ in range(size)])
            done += size
            if rate:
                time.sleep(max(0.0, start + done / rate - time.monotonic()))
        return Span(start, time.monotonic(), done)

    def drain(self, queue: str, batch: int) -> Span:
        start = time.monotonic()
        done = 0
        while True:
            try:
                leased = self.q.lease(queue, client_id=self.client_id, batch_size=batch)
            except RequestTimeout:
                break
            self.q.complete(queue, leased)
            done += len(leased)
        return Span(start, time.monotonic(), done)

    def drain_threads(self, queue: str, batch: int, threads: int) -> Span:
        """Drain with ``threads`` threads sharing this one client."""
        with ThreadPoolExecutor(threads) as pool:
            spans = list(pool.map(lambda _: self.drain(queue, batch), range(threads)))
        return Span(
            min(s.start for s in spans), max(s.end for s in spans), sum(s.count for s in spans)
        )

    def consume(self, queue: str, batch: int, seconds: float) -> Received:
        result = Received(time.monotonic(), 0.0)
        deadline = Deadline(seconds)
        while (remaining := deadline.remaining()) > 0:
            try:
                leased = self.q.lease(
                    queue, client_id=self.client_id, batch_size=batch, timeout=remaining
                )
            except RequestTimeout:
                continue
            now = time.monotonic()
            result.samples += [(now, age_of(item.payload)) for item in leased]
            self.q.complete(queue, leased)
        result.count = len(result.samples)
        result.end = time.monotonic()
        return result

    def idle(self, queue: str, seconds: float) -> Span:
        start = time.monotonic()
        deadline = Deadline(seconds)
        while (remaining := deadline.remaining()) > 0:
            try:
                self.q.lease(queue, client_id=self.client_id, timeout=min(WAIT, remaining))
            except RequestTimeout:
                continue
            raise RuntimeError("idle queue was not empty")
        return Span(start, time.monotonic())

    def lease_latency(self, queue: str, samples: int, seconds: float) -> list[float]:
        timings: list[float] = []
        deadline = Deadline(seconds)
        while len(timings) < samples and not deadline.passed():
            began = time.perf_counter()
            leased = self.q.lease(queue, client_id=self.client_id)
            timings.append(time.perf_counter() - began)
            self.q.complete(queue, leased)
        return timings

    def close(self) -> None:
        self.q.close()


def make_agent(dsn: str) -> Agent:
    """The entry point :class:`benchmarks.systems.System` calls."""
    return QueratorAgent(dsn)
