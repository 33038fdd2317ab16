"""Counter, histogram and gauge values after a known workload, on every store."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from otel_sdk import Telemetry

from querator import Item, Querator, QueueSettings
from querator.clock import ManualClock
from telemetry.metric_points import points, value


def test_a_known_workload_reads_back_from_the_instruments(
    q: Querator, qname: str, otel: Telemetry
) -> None:
    dead = f"{qname}-dead"
    q.create_queue(dead)
    q.create_queue(qname, QueueSettings(dead_queue=dead))
    began = time.monotonic()
    q.produce(qname, [Item(payload=bytes([i])) for i in range(4)])
    q.produce(qname, [Item(payload=b"later", enqueue_at=datetime.now(UTC) + timedelta(hours=1))])
    batch = q.lease(qname, client_id="w1", batch_size=10)
    assert len(batch) == 4
    q.complete(qname, batch[:2])
    q.retry(qname, batch[2:3])
    q.retry(qname, batch[3:], dead=True)
    elapsed = time.monotonic() - began
    q.publish_gauges()

    assert value(otel, "querator.queue.produced", queue=qname) == 5
    assert value(otel, "querator.queue.produced", queue=dead) is None  # moves are not produces
    assert value(otel, "querator.queue.completed", queue=qname) == 2
    assert value(otel, "querator.queue.retried", queue=qname) == 2
    [waits] = points(otel, "querator.queue.lease.wait", queue=qname)
    assert waits.count == 4
    assert 0 <= waits.sum <= 4 * (elapsed + 0.05)  # PostgreSQL's clock is the host's here
    [held] = points(otel, "querator.queue.lease.duration", queue=qname)
    assert held.count == 2
    assert 0 <= held.sum <= 2 * elapsed

    assert value(otel, "querator.queue.depth", queue=qname) == 2
    assert value(otel, "querator.queue.scheduled", queue=qname) == 1
    assert value(otel, "querator.queue.leased", queue=qname) == 0
    assert value(otel, "querator.queue.depth", queue=dead) == 1
    assert value(otel, "querator.queue.dead_letter.depth", queue=qname, dead_queue=dead) == 1
    age = value(otel, "querator.queue.oldest_age", queue=qname)
    assert age is not None and 0 <= age <= elapsed + 1


def test_a_lease_of_a_scheduled_item_waited_from_its_due_time(
    q: Querator, qname: str, otel: Telemetry
) -> None:
    """The wait runs from ``available_at`` (its due time), not from the produce."""
    q.create_queue(qname)
    due = datetime.now(UTC) + timedelta(milliseconds=300)
    q.produce(qname, [Item(payload=b"due", enqueue_at=due)])
    [leased] = q.lease(qname, client_id="w1", timeout=10)
    leased_at = datetime.now(UTC)
    [waits] = points(otel, "querator.queue.lease.wait", queue=qname)
    assert waits.count == 1
    assert 0 <= waits.sum <= (leased_at - due).total_seconds() + 0.05
    assert leased.payload == b"due"


def test_lease_to_complete_is_measured_by_the_store_for_items_another_client_leased(
    backend_name: str, backend_url: str, qname: str, otel: Telemetry
) -> None:
    """The store records when a lease began: the client that completes measures
    items another client (another process) leased, on the store's clock."""
    clock = ManualClock()
    with Querator(backend_url, clock=clock) as q:
        q.create_queue(qname, QueueSettings(lease_timeout=60))
        q.produce(qname, [Item(payload=b"a"), Item(payload=b"b")])
        if backend_name == "memory":  # a memory store has one client
            batch = q.lease(qname, client_id="other", batch_size=2)
        else:
            with Querator(backend_url, clock=clock) as other:
                batch = other.lease(qname, client_id="other", batch_size=2)
        clock.advance(seconds=7)
        q.complete(qname, batch)
    [held] = points(otel, "querator.queue.lease.duration", queue=qname)
    assert held.count == 2
    assert 14 <= held.sum < 15
