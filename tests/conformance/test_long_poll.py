"""Long polling: lease(timeout=...) returns as soon as an item becomes available.

The bounds here are generous (1 s) and only catch a lease that sleeps instead of
being woken; the measured delay is in every assertion message. Speed itself is
benchmarked elsewhere.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import anyio
import pytest

from querator import AsyncQuerator, Item, Leased, Querator, QueueSettings
from querator.errors import RequestTimeout

from .helpers import SETTLE, WAKE_BOUND, ids_of, items, lease_in_background, lease_one, make_queue


def test_produce_wakes_a_waiting_lease(
    q: Querator, q2: Querator, pool: ThreadPoolExecutor, qname: str
) -> None:
    make_queue(q, qname)
    waiting = lease_in_background(pool, q, qname, "waiter")

    produced_at = time.time()
    (item_id,) = q2.produce(qname, items(b"wake up"))
    batch, returned_at = waiting.result(timeout=10)

    delay = returned_at - produced_at
    assert ids_of(batch) == [item_id]
    assert delay < WAKE_BOUND, f"long poll woke {delay * 1000:.0f} ms after produce"


def test_lease_expiry_wakes_a_waiting_lease(
    q: Querator, q2: Querator, pool: ThreadPoolExecutor, qname: str
) -> None:
    make_queue(q, qname, lease_timeout=0.5)
    q.produce(qname, items(b"x"))
    held = lease_one(q2, qname, client_id="doomed")
    waiting = lease_in_background(pool, q, qname, "heir")

    batch, returned_at = waiting.result(timeout=10)
    delay = returned_at - held.lease_deadline.timestamp()
    assert ids_of(batch) == [held.id]
    assert delay >= -0.05, f"re-leased {-delay * 1000:.0f} ms before the lease ended"
    assert delay < WAKE_BOUND, f"long poll woke {delay * 1000:.0f} ms after the lease expired"


def test_retry_wakes_a_waiting_lease(
    q: Querator, q2: Querator, pool: ThreadPoolExecutor, qname: str
) -> None:
    make_queue(q, qname, lease_timeout=30)
    q.produce(qname, items(b"x"))
    held = lease_one(q2, qname, client_id="giver")
    waiting = lease_in_background(pool, q, qname, "taker")

    retried_at = time.time()
    q2.retry(qname, [held])
    batch, returned_at = waiting.result(timeout=10)
    delay = returned_at - retried_at
    assert ids_of(batch) == [held.id]
    assert delay < WAKE_BOUND, f"long poll woke {delay * 1000:.0f} ms after retry"


def test_dead_letter_arrival_wakes_a_waiting_lease(
    q: Querator, q2: Querator, pool: ThreadPoolExecutor, qname: str
) -> None:
    dead = make_queue(q, f"{qname}-dead")
    src = make_queue(q, qname, dead_queue=dead)
    (item_id,) = q.produce(src, items(b"x"))
    held = lease_one(q2, src)
    waiting = lease_in_background(pool, q, dead, "undertaker")

    moved_at = time.time()
    q2.retry(src, [held], dead=True)
    batch, returned_at = waiting.result(timeout=10)
    delay = returned_at - moved_at
    assert [b.source_id for b in batch] == [item_id]
    assert delay < WAKE_BOUND, f"long poll woke {delay * 1000:.0f} ms after dead-lettering"


def test_each_waiter_gets_a_different_item(
    q: Querator, q2: Querator, pool: ThreadPoolExecutor, qname: str
) -> None:
    make_queue(q, qname, lease_timeout=30)
    waiters = [lease_in_background(pool, q, qname, f"w{i}", timeout=5) for i in range(3)]

    ids = q2.produce(qname, items(b"1", b"2", b"3"))
    got = [w.result(timeout=10)[0] for w in waiters]
    leased_ids = [i for batch in got for i in ids_of(batch)]
    assert sorted(leased_ids) == sorted(ids)


def test_waiting_lease_times_out_when_nothing_comes(
    q: Querator, pool: ThreadPoolExecutor, qname: str
) -> None:
    make_queue(q, qname)
    other = make_queue(q, f"{qname}-other")
    waiting = lease_in_background(pool, q, qname, "patient", timeout=0.6)
    q.produce(other, items(b"not for you"))
    with pytest.raises(RequestTimeout):
        waiting.result(timeout=10)


@pytest.mark.anyio
async def test_async_produce_wakes_a_waiting_lease(aq: AsyncQuerator, qname: str) -> None:
    await aq.create_queue(qname, QueueSettings())
    results: list[tuple[list[Leased], float]] = []

    async def waiter() -> None:
        batch = await aq.lease(qname, client_id="async-waiter", timeout=5)
        results.append((batch, time.time()))

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.sleep(SETTLE)  # deliberate: let the lease block first
        assert results == []
        produced_at = time.time()
        ids = await aq.produce(qname, [Item(payload=b"async")])

    ((batch, returned_at),) = results
    delay = returned_at - produced_at
    assert ids_of(batch) == ids
    assert delay < WAKE_BOUND, f"async long poll woke {delay * 1000:.0f} ms after produce"


@pytest.mark.anyio
async def test_async_lease_times_out(aq: AsyncQuerator, qname: str) -> None:
    await aq.create_queue(qname)
    with pytest.raises(RequestTimeout):
        await aq.lease(qname, client_id="c1", timeout=0.3)
