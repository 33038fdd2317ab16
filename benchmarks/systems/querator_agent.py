"""querator as a user runs it: one sync ``Querator`` client per process.

Each consumer process leases with ``q.lease(...)`` and completes with
``q.complete(...)``, exactly as the README shows (a consumer that loops, draining
or waiting, passes each batch to the next lease, ``lease(..., complete=batch)``:
one round trip a batch); waiting consumers long-poll
(``timeout``) and are woken by LISTEN/NOTIFY.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from benchmarks.systems.base import Agent, Deadline, Received, Span, age_of, stamp
from querator import Item, Leased, Querator, QueueSettings, Worker, step, workflow
from querator.errors import QueueNotFound, RequestTimeout

WAIT = 30.0
"""The long-poll timeout a worker would use."""
RESULT_TIMEOUT = 120.0
"""How long a caller waits for one workflow run's result."""


@step(name="qbench.step_one")
def step_one() -> float:
    """The first step: the wall-clock instant it ran (for enqueue-to-first-step)."""
    return time.time()


@step(name="qbench.step_two")
def step_two(value: float) -> float:
    return value


@step(name="qbench.step_three")
def step_three(value: float) -> float:
    return value


@workflow(name="qbench.three_steps")
def three_steps() -> float:
    """The same three-step no-op workflow DBOS runs; returns step one's instant."""
    return step_three(step_two(step_one()))


WORKFLOW_FUNCTIONS = [three_steps, step_one, step_two, step_three]


class QueratorAgent(Agent):
    """A sync client on the database's ``querator`` schema."""

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn)
        self.q = Querator(dsn)
        self.client_id = f"bench-{os.getpid()}"
        self._worker: Worker | None = None
        self._worker_thread: threading.Thread | None = None

    def install(self) -> None:
        """The client creates its schema when it opens."""

    def reset(self, queue: str, partitions: int = 1) -> None:
        """Drop every queue of the store (left-overs would add to maintenance work),
        then create ``queue``."""
        for old in self.q.list_queues(limit=1000):
            with contextlib.suppress(QueueNotFound):
                self.q.delete_queue(old.name, force=True)
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
        leased: list[Leased] = []
        while True:  # each lease completes the previous batch (one round trip)
            try:
                leased = self.q.lease(
                    queue, client_id=self.client_id, batch_size=batch, complete=leased
                )
            except RequestTimeout:
                break
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
        leased: list[Leased] = []
        while (remaining := deadline.remaining()) > 0:
            try:  # each lease completes the previous batch (one round trip)
                leased = self.q.lease(
                    queue,
                    client_id=self.client_id,
                    batch_size=batch,
                    timeout=remaining,
                    complete=leased,
                )
            except RequestTimeout:  # the previous batch stays completed
                leased = []
                continue
            now = time.monotonic()
            result.samples += [(now, age_of(item.payload)) for item in leased]
        if leased:
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

    def workflow_worker(self, concurrency: int) -> None:
        """Serve the benchmark workflow in a background thread of this process,
        as ``Worker(q, fns, concurrency=...).run()`` in a worker process would."""
        if self._worker is not None:
            return
        self._worker = Worker(
            self.q, WORKFLOW_FUNCTIONS, concurrency=concurrency, client_id=self.client_id
        )
        self._worker_thread = threading.Thread(target=self._worker.run, daemon=True)
        self._worker_thread.start()

    def workflow_worker_stop(self) -> None:
        """Stop this process's worker (its items in hand finish first)."""
        if self._worker is None or self._worker_thread is None:
            return
        self._worker.stop()
        self._worker_thread.join(timeout=30)
        self._worker = self._worker_thread = None

    def workflows(self, count: int, threads: int, eager: bool = False) -> Span:
        """Run ``count`` workflows to completion on the worker processes.

        ``threads`` = 0: start all ``count`` runs, then wait for every result
        (time from the first start to the last result). ``threads`` >= 1: that
        many caller threads, each starting one run and waiting for its result
        before the next (as DBOS's callers do). ``eager``: each caller runs its
        runs itself (``start(..., eager=True)``, as DBOS's direct execution)."""
        start = time.monotonic()

        def one(_: object = None) -> None:
            self.q.start(three_steps, eager=eager).result(timeout=RESULT_TIMEOUT)

        if threads == 0:
            runs = [self.q.start(three_steps, eager=eager) for _ in range(count)]
            for run in runs:
                run.result(timeout=RESULT_TIMEOUT)
        elif threads == 1:
            for _ in range(count):
                one()
        else:
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(one, range(count)))
        return Span(start, time.monotonic(), count)

    def workflow_latency(self, samples: int, pause: float) -> list[tuple[float, float]]:
        """(seconds from ``start`` (wall clock, just before the call) to the first
        step running on a waiting worker, seconds the ``start`` call itself took),
        one run at a time, ``pause`` apart so the workers are back in their long
        poll."""
        timings: list[tuple[float, float]] = []
        for _ in range(samples):
            time.sleep(pause)
            began = time.time()
            run = self.q.start(three_steps)
            started = time.time()
            first: float = run.result(timeout=RESULT_TIMEOUT)
            timings.append((first - began, started - began))
        return timings

    def close(self) -> None:
        self.workflow_worker_stop()
        self.q.close()


def make_agent(dsn: str) -> Agent:
    """The entry point :class:`benchmarks.systems.System` calls."""
    return QueratorAgent(dsn)
