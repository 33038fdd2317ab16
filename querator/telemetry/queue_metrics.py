"""The lease queue's counters and histograms (OpenTelemetry instruments).

Every instrument comes from :func:`querator.telemetry.meter`, taken once at
import: before the application sets a ``MeterProvider`` they are the API's
proxies (they follow the provider set later), and with none set every
``add``/``record`` is a no-op call. Each carries one attribute, ``queue``.

The gauges (depth, leased, scheduled, oldest age, dead letters) are observed
from the store: :mod:`querator.telemetry.queue_gauges`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from querator.telemetry import meter

QUEUE: Final = "queue"
"""The attribute naming the queue on every queue instrument."""

LEASE_BUCKETS: Final = (
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 900.0, 3600.0,
)  # fmt: skip
"""Histogram bucket bounds (seconds) of the lease latencies: milliseconds to an hour."""

_meter = meter()

produced = _meter.create_counter(
    "querator.queue.produced", unit="{item}", description="Items produced (new or dedup hits)."
)
completed = _meter.create_counter(
    "querator.queue.completed", unit="{item}", description="Leased items completed."
)
retried = _meter.create_counter(
    "querator.queue.retried",
    unit="{item}",
    description="Leased items given back (retry, including retry into the dead queue).",
)
lease_wait = _meter.create_histogram(
    "querator.queue.lease.wait",
    unit="s",
    description="Time an item waited from its available_at to being leased.",
    explicit_bucket_boundaries_advisory=LEASE_BUCKETS,
)
lease_duration = _meter.create_histogram(
    "querator.queue.lease.duration",
    unit="s",
    description="Time from a lease to the completion of its item, measured by the store "
    "whoever leased it.",
    explicit_bucket_boundaries_advisory=LEASE_BUCKETS,
)


def count(counter_items: Iterable[tuple[str, int]], which: str) -> None:
    """Add ``n`` per ``(queue, n)`` to the counter named ``which``."""
    counter = _COUNTERS[which]
    for queue, n in counter_items:
        if n:
            counter.add(n, {QUEUE: queue})


def per_queue(queues: Sequence[str]) -> dict[str, int]:
    """How many times each queue appears in ``queues`` (one per item)."""
    found: dict[str, int] = {}
    for queue in queues:
        found[queue] = found.get(queue, 0) + 1
    return found


def waited(queue: str, seconds: Iterable[float]) -> None:
    """Record the lease waits of one lease's items."""
    attributes = {QUEUE: queue}
    for value in seconds:
        lease_wait.record(max(0.0, value), attributes)


def held(queue: str, seconds: Iterable[float]) -> None:
    """Record the lease-to-complete latencies the store measured for one queue."""
    attributes = {QUEUE: queue}
    for value in seconds:
        lease_duration.record(max(0.0, value), attributes)


_COUNTERS: Final = {"produced": produced, "completed": completed, "retried": retried}


class LeaseClock:
    """When this client leased the items it may complete: the start of the
    lease-to-complete latency (kept for at most ``limit`` items, oldest dropped)."""

    def __init__(self, limit: int = 100_000) -> None:
        self._limit = limit
        self._at: dict[str, float] = {}

    def leased(self, ids: Iterable[str], now: float) -> None:
        """The items ``ids`` were leased at ``now`` (monotonic seconds)."""
        at = self._at
        for item_id in ids:
            at[item_id] = now
        while len(at) > self._limit:
            del at[next(iter(at))]

    def forget(self, ids: Iterable[str]) -> None:
        """The items ``ids`` left their leases and were measured otherwise."""
        at = self._at
        for item_id in ids:
            at.pop(item_id, None)

    def finished(self, queue_ids: Iterable[tuple[str, str]], now: float, done: bool) -> None:
        """The ``(queue, id)`` items left their leases at ``now``; when ``done``
        (completed) record each one's lease-to-complete latency."""
        at = self._at
        for queue, item_id in queue_ids:
            start = at.pop(item_id, None)
            if start is not None and done:
                lease_duration.record(now - start, {QUEUE: queue})
