"""Small helpers the conformance tests share."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

from querator import Item, Leased, Querator, QueueSettings, StoredItem, TransactResult
from querator.errors import RequestTimeout

START = datetime(2031, 3, 4, 5, 6, 7, tzinfo=UTC)
"""Where the ``clock`` fixture stands: years ahead of the store's clock, so that
anything decided by the wrong clock shows."""


def utcnow() -> datetime:
    """The current instant, timezone-aware."""
    return datetime.now(UTC)


def later(seconds: float) -> datetime:
    """The instant ``seconds`` from now."""
    return utcnow() + timedelta(seconds=seconds)


def items(*payloads: bytes, **fields: Any) -> list[Item]:
    """One Item per payload, each with the same extra ``fields``."""
    return [Item(payload=p, **fields) for p in payloads]


def make_queue(q: Querator, name: str, **settings: Any) -> str:
    """Create queue ``name`` with ``settings`` and return its name."""
    q.create_queue(name, QueueSettings(**settings))
    return name


def drain(
    q: Querator, queue: str, client_id: str = "drainer", batch_size: int = 100
) -> list[Leased]:
    """Lease (without waiting) until the queue has nothing leasable; return all leased."""
    leased: list[Leased] = []
    while True:
        try:
            leased.extend(q.lease(queue, client_id=client_id, batch_size=batch_size))
        except RequestTimeout:
            return leased


def lease_one(q: Querator, queue: str, client_id: str = "c1", timeout: float = 0.0) -> Leased:
    """Lease exactly one item and return it."""
    batch = q.lease(queue, client_id=client_id, batch_size=1, timeout=timeout)
    assert len(batch) == 1, f"expected one leased item, got {len(batch)}"
    return batch[0]


def ids_of(records: Iterable[StoredItem]) -> list[str]:
    """The ``id`` of each record, in order."""
    return [r.id for r in records]


def payloads_of(records: Iterable[StoredItem]) -> list[bytes]:
    """The ``payload`` of each record, in order."""
    return [r.payload for r in records]


def same_instant(a: datetime | None, b: datetime | None, tolerance: float = 0.001) -> bool:
    """True when both are None or both name the same instant (within ``tolerance`` s)."""
    if a is None or b is None:
        return a is b
    return abs((a - b).total_seconds()) <= tolerance


WAKE_BOUND = 1.0
"""Seconds a woken long poll may take to return (design target: ~100 ms)."""
SETTLE = 0.2
"""Seconds given to a background lease to start blocking before the event under test."""


def lease_in_background(
    pool: ThreadPoolExecutor,
    client: Querator,
    queue: str,
    client_id: str,
    batch_size: int = 1,
    timeout: float = 5.0,
) -> Future[tuple[list[Leased], float]]:
    """Start a long-poll lease in a thread; its future gives (items, wall time of return)."""
    started = threading.Event()

    def run() -> tuple[list[Leased], float]:
        started.set()
        batch = client.lease(queue, client_id=client_id, batch_size=batch_size, timeout=timeout)
        return batch, time.time()

    future = pool.submit(run)
    assert started.wait(5), "background lease thread did not start"
    time.sleep(SETTLE)  # deliberate: let the lease block in its long poll first
    assert not future.done(), "lease returned before anything was produced"
    return future


def commit(q: Querator, **options: Any) -> TransactResult:
    """``AsyncQuerator.commit`` (transact with the engine's knobs) from sync code."""
    return q.call(q.aio.commit, **options)
