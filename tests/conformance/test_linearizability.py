"""Concurrent consumers against one queue; their recorded history must be linearizable.

Four consumer threads lease from a queue with a short lease timeout and, at
random, complete, retry, renew-then-finish, or "crash": abandon the lease and,
once it has surely run out, send a late complete/retry/renew with the old
version. Every call is recorded with its invocation and return instants
(:mod:`.history`), and the whole history is checked against the sequential
semantics. The first tests show that the checker rejects bad histories.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import random
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from queue import Empty
from typing import Any, Protocol

import pytest
from polling import wait_for

from querator import Item, Leased, Querator, QueueSettings
from querator.errors import Conflict, RequestTimeout

from .history import OK, Op, Recorder, check_history

LEASE_TIMEOUT = 0.3
THREADS = 4
PROCESSES = 2
ITEMS = 40
BATCHES = 4
LATE_MARGIN = 0.05
"""How long after a lease deadline a crashed consumer sends its late call."""
RUN_LIMIT = 30.0
"""Consumers that are not done by then fail the test."""


# -- the checker rejects bad histories -------------------------------------------------


def op(kind: str, t0: float, t1: float, thread: str = "t1", **fields: Any) -> Op:
    """An op on item ``i``; leases default to version 2, attempt 1."""
    if kind == "lease":
        fields = {"version_out": 2, "attempts": 1, **fields}
    return Op(thread, kind, "i", t0, t1, **fields)


PRODUCED = op("produce", 0.0, 0.01)


def test_checker_accepts_a_correct_history() -> None:
    history = [
        PRODUCED,
        op("lease", 0.02, 0.03),
        op("renew", 0.04, 0.05, version_in=2, version_out=3),
        op("complete", 0.50, 0.51, version_in=2, outcome="stale", late=True, thread="t2"),
        op("retry", 0.06, 0.07, version_in=3),
        op("lease", 0.08, 0.09, version_out=5, attempts=2, thread="t2"),
        op("complete", 0.10, 0.11, version_in=5, thread="t2"),
    ]
    assert check_history(history, lease_timeout=0.3) == []


def test_checker_rejects_two_overlapping_leases() -> None:
    history = [
        PRODUCED,
        op("lease", 0.02, 0.03),
        op("lease", 0.04, 0.05, version_out=3, attempts=2, thread="t2"),
        op("complete", 0.06, 0.07, version_in=3, thread="t2"),
    ]
    (problem,) = check_history(history, lease_timeout=0.3)
    assert "leased while an earlier lease held" in problem


def test_checker_accepts_a_lease_after_expiry() -> None:
    history = [
        PRODUCED,
        op("lease", 0.02, 0.03),
        op("lease", 0.40, 0.41, version_out=3, attempts=2, thread="t2"),
        op("complete", 0.42, 0.43, version_in=3, thread="t2"),
    ]
    assert check_history(history, lease_timeout=0.3) == []


def test_checker_rejects_a_successful_complete_on_a_stale_version() -> None:
    history = [
        PRODUCED,
        op("lease", 0.02, 0.03),
        op("lease", 0.40, 0.41, version_out=3, attempts=2, thread="t2"),
        op("complete", 0.42, 0.43, version_in=2),
        op("complete", 0.44, 0.45, version_in=3, thread="t2"),
    ]
    problems = check_history(history, lease_timeout=0.3)
    assert any("succeeded on v2 after" in p for p in problems), problems
    assert any("completed 2 times" in p for p in problems), problems


def test_checker_rejects_a_late_call_that_succeeded_or_misreported() -> None:
    history = [
        PRODUCED,
        op("lease", 0.02, 0.03),
        op("lease", 0.40, 0.41, version_out=3, attempts=2, thread="t2"),
        op("renew", 0.42, 0.43, version_in=2, late=True, outcome="not_leased"),
        op("complete", 0.44, 0.45, version_in=3, thread="t2"),
    ]
    (problem,) = check_history(history, lease_timeout=0.3)
    assert "reported not_leased, not stale" in problem


def test_checker_rejects_wrong_attempts_lost_items_and_version_reuse() -> None:
    history = [
        PRODUCED,
        op("lease", 0.02, 0.03, attempts=2),
        op("lease", 0.40, 0.41, version_out=2, thread="t2"),
    ]
    problems = check_history(history, lease_timeout=0.3)
    assert any("lease #1 reported 2 attempts" in p for p in problems), problems
    assert any("granted twice" in p for p in problems), problems
    assert any("completed 0 times" in p for p in problems), problems


def test_checker_rejects_a_failure_under_a_live_lease() -> None:
    history = [
        PRODUCED,
        op("lease", 0.02, 0.03),
        op("complete", 0.04, 0.05, version_in=2, outcome="not_leased"),
        op("complete", 0.06, 0.07, version_in=2),
    ]
    (problem,) = check_history(history, lease_timeout=0.3)
    assert "failed although its lease surely held" in problem


# -- concurrent consumers -------------------------------------------------------------


class Flag(Protocol):
    """A threading or multiprocessing Event."""

    def is_set(self) -> bool: ...

    def set(self) -> None: ...


@dataclass
class Late:
    """A lease a consumer abandoned ("crashed") and will use after it ran out."""

    item: Leased
    kind: str
    after_relet: bool
    """Wait until the item was leased again (so the call must fail stale or missing)."""


@dataclass
class Progress:
    """What the consumers of one process share."""

    finished: Flag
    """Set by the test once every item is completed (the queue is empty)."""
    abort: Flag
    """Set by the test when it gives up: consumers stop at once."""
    granted: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    announce: Callable[[], None] | None = None
    """Called once, after the first lease (a process tells the test it is leasing)."""

    def grant(self, item: Leased) -> None:
        with self.lock:
            first = not self.granted
            self.granted[item.id] = max(self.granted.get(item.id, 0), item.version)
        if first and self.announce is not None:
            self.announce()

    def relet(self, item: Leased) -> bool:
        """Whether ``item`` was surely leased again since (once finished, it was)."""
        with self.lock:
            return self.granted.get(item.id, 0) > item.version or self.finished.is_set()


@dataclass
class Consumer:
    """One consumer: leases and does something random with each item."""

    name: str
    client: Querator
    queue: str
    progress: Progress
    rng: random.Random
    recorder: Recorder = field(default_factory=Recorder)
    pending: list[Late] = field(default_factory=list)
    crashed: bool = False
    error: BaseException | None = None

    def run(self) -> None:
        try:
            self.loop()
        except BaseException as exc:
            self.error = exc

    def loop(self) -> None:
        deadline = time.monotonic() + RUN_LIMIT
        while not self.progress.abort.is_set():
            self.send_late_calls()
            if self.progress.finished.is_set() and not self.pending:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} not done in {RUN_LIMIT}s")
            for item in self.lease():
                self.handle(item)

    def lease(self) -> list[Leased]:
        t0 = time.monotonic()
        try:
            batch = self.client.lease(
                self.queue,
                client_id=self.name,
                batch_size=self.rng.randint(1, 2),
                timeout=0.01 if self.pending else 0.05,  # wake up for due late calls
            )
        except RequestTimeout:
            return []
        t1 = time.monotonic()
        for item in batch:
            self.progress.grant(item)
            self.recorder.add(
                Op(self.name, "lease", item.id, t0, t1, OK, None, item.version, item.attempts)
            )
        return batch

    def handle(self, item: Leased) -> None:
        if item.attempts < 3 and (not self.crashed or self.rng.random() < 0.2):
            self.crashed = True
            kind = self.rng.choice(["complete", "retry", "renew"])
            self.pending.append(Late(item, kind, after_relet=self.rng.random() < 0.5))
            return
        if self.rng.random() < 0.25:
            renewed = self.call("renew", item)
            if renewed is None:
                return
            item = renewed
        kind = "retry" if self.rng.random() < 0.3 and item.attempts < 4 else "complete"
        self.call(kind, item)

    def send_late_calls(self) -> None:
        for late in list(self.pending):
            expired = time.time() > late.item.lease_deadline.timestamp() + LATE_MARGIN
            if expired and (not late.after_relet or self.progress.relet(late.item)):
                self.pending.remove(late)
                self.call(late.kind, late.item, late=True)

    def call(self, kind: str, item: Leased, late: bool = False) -> Leased | None:
        """complete, retry or renew one item; record it; the renewed item if any."""
        calls: dict[str, Callable[[], list[Leased] | None]] = {
            "complete": lambda: self.client.complete(self.queue, [item]),
            "retry": lambda: self.client.retry(self.queue, [item]),
            "renew": lambda: self.client.renew(self.queue, [item]),
        }
        t0 = time.monotonic()
        try:
            result, outcome = calls[kind](), OK
        except Conflict as exc:
            result, outcome = None, exc.reasons[item.id].value
        t1 = time.monotonic()
        renewed = result[0] if result else None
        version_out = renewed.version if renewed else None
        self.recorder.add(
            Op(self.name, kind, item.id, t0, t1, outcome, item.version, version_out, late=late)
        )
        if renewed is not None:
            self.progress.grant(renewed)
        return renewed


def start_threads(
    q: Querator, backend_name: str, url: str, queue: str, progress: Progress, stack: ExitStack
) -> list[tuple[Consumer, threading.Thread]]:
    """Consumer threads; on stores other clients can open, every other one has a
    client (and connections) of its own, the rest share the fixture's client."""
    started = []
    for index in range(THREADS):
        own = index % 2 == 1 and backend_name != "memory"
        client = stack.enter_context(Querator(url)) if own else q
        consumer = Consumer(f"t{index}", client, queue, progress, random.Random(index))
        thread = threading.Thread(target=consumer.run, name=consumer.name)
        thread.start()
        started.append((consumer, thread))
    return started


def produce_all(q: Querator, queue: str, batches: range = range(BATCHES)) -> list[Op]:
    """Produce every item in a few batches; the produce ops, one per item."""
    ops = []
    for batch in batches:
        payloads = [f"{batch}-{i}".encode() for i in range(ITEMS // BATCHES)]
        t0 = time.monotonic()
        ids = q.produce(queue, [Item(payload=p) for p in payloads])
        t1 = time.monotonic()
        ops += [Op("producer", "produce", item_id, t0, t1) for item_id in ids]
    return ops


def wait_until_drained(q: Querator, queue: str, running: Callable[[], bool]) -> None:
    """Wait until the queue is empty (or every consumer stopped: they failed)."""
    wait_for(
        lambda: q.stats(queue).total == 0 or not running(),
        timeout=RUN_LIMIT,
        interval=0.02,
        message=f"every item of {queue} completed",
    )


def test_concurrent_history_is_linearizable(
    q: Querator, backend_name: str, backend_url: str, qname: str
) -> None:
    q.create_queue(qname, QueueSettings(lease_timeout=LEASE_TIMEOUT, partitions=2))
    progress = Progress(finished=threading.Event(), abort=threading.Event())
    with ExitStack() as stack:
        started = start_threads(q, backend_name, backend_url, qname, progress, stack)
        threads = [thread for _, thread in started]
        try:
            produced = produce_all(q, qname)
            wait_until_drained(q, qname, lambda: any(t.is_alive() for t in threads))
            progress.finished.set()
            wait_for(lambda: not any(t.is_alive() for t in threads), message="late calls sent")
        finally:
            progress.abort.set()
            for thread in threads:
                thread.join(timeout=10)
    for consumer, _ in started:
        if consumer.error is not None:
            raise consumer.error

    ops = produced + [op for consumer, _ in started for op in consumer.recorder.snapshot()]
    assert check_history(ops, LEASE_TIMEOUT) == []
    assert q.stats(qname).total == 0
    assert_history_exercised(ops, crashes=THREADS)


def assert_history_exercised(ops: list[Op], crashes: int) -> None:
    """The run did what it is meant to test: crashes, re-leases, renews, retries."""
    late = [o for o in ops if o.late]
    assert len(late) >= crashes
    assert any(o.outcome in ("stale", "missing") for o in late)
    assert any(o.kind == "renew" and o.ok and not o.late for o in ops)
    assert any(o.kind == "retry" and o.ok for o in ops)
    assert any(o.kind == "lease" and (o.attempts or 0) >= 2 for o in ops)


# -- consumers in other processes ------------------------------------------------------


def consume_in_process(
    name: str,
    url: str,
    queue: str,
    ready: Any,
    flags: tuple[Flag, Flag],
    leasing: Any,
    out: Any,
) -> None:
    """A consumer process: runs one :class:`Consumer` and sends back its history
    (``flags``: finished, abort; it puts its name on ``leasing`` once it leased)."""
    finished, abort = flags
    progress = Progress(finished=finished, abort=abort, announce=lambda: leasing.put(name))
    with Querator(url) as client:
        ready.wait(timeout=RUN_LIMIT)
        consumer = Consumer(name, client, queue, progress, random.Random(name))
        consumer.run()
    out.put((consumer.recorder.ops, None if consumer.error is None else repr(consumer.error)))


def until_every_process_leased(q: Querator, queue: str, leasing: Any) -> tuple[list[Op], int]:
    """Produce batches (one whenever the queue is empty) until every consumer
    process has leased; the produce ops and how many batches that took."""
    produced: list[Op] = []
    leased: set[str] = set()
    batches = 0
    deadline = time.monotonic() + RUN_LIMIT
    while len(leased) < PROCESSES:
        assert time.monotonic() < deadline, f"only {sorted(leased)} leased"
        if q.stats(queue).total == 0:
            produced += produce_all(q, queue, range(batches, batches + 1))
            batches += 1
        with contextlib.suppress(Empty):
            leased.add(leasing.get(timeout=0.05))
    return produced, batches


def test_history_across_processes_is_linearizable(
    q: Querator, backend_name: str, backend_url: str, qname: str
) -> None:
    if backend_name == "memory":
        pytest.skip("a memory:// store lives in one process")
    q.create_queue(qname, QueueSettings(lease_timeout=LEASE_TIMEOUT, partitions=2))
    ctx = multiprocessing.get_context("spawn")
    finished, abort, out, leasing = ctx.Event(), ctx.Event(), ctx.Queue(), ctx.Queue()
    ready = ctx.Barrier(PROCESSES + 1)
    procs = [
        ctx.Process(
            target=consume_in_process,
            args=(f"p{i}", backend_url, qname, ready, (finished, abort), leasing, out),
            daemon=True,
        )
        for i in range(PROCESSES)
    ]
    progress = Progress(finished=finished, abort=abort)
    try:
        for proc in procs:
            proc.start()
        ready.wait(timeout=RUN_LIMIT)  # the processes are connected and about to lease
        # every process leases before the threads join in (they would start sooner)
        produced, batches = until_every_process_leased(q, qname, leasing)
        with ExitStack() as stack:
            started = start_threads(q, backend_name, backend_url, qname, progress, stack)
            produced += produce_all(q, qname, range(batches, max(BATCHES, batches + 2)))
            wait_until_drained(q, qname, lambda: all(p.is_alive() for p in procs))
            finished.set()
            results = [out.get(timeout=RUN_LIMIT) for _ in procs]
            for _, thread in started:
                thread.join(timeout=RUN_LIMIT)
    finally:
        abort.set()
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
    assert [error for _, error in results] == [None] * PROCESSES
    for consumer, _ in started:
        if consumer.error is not None:
            raise consumer.error

    ops = produced + [op for consumer, _ in started for op in consumer.recorder.snapshot()]
    ops += [op for history, _ in results for op in history]
    assert {o.thread for o in ops if o.kind == "lease"} >= {f"p{i}" for i in range(PROCESSES)}
    assert check_history(ops, LEASE_TIMEOUT) == []
    assert q.stats(qname).total == 0
    assert_history_exercised(ops, crashes=THREADS + PROCESSES)
