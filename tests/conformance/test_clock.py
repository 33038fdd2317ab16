"""An injected clock decides every instant: due items, expired leases, expiry, renewals.

A :class:`ManualClock` stands still (the ``clock`` and ``cq`` fixtures of
conftest.py); each test steps it by hours without sleeping, and a store whose
own clock would say otherwise must follow it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from querator import Item, Querator, QueueSettings
from querator.clock import ManualClock, SystemClock
from querator.errors import Conflict, InvalidArgument, RequestTimeout

from .helpers import START, ids_of, make_queue


def test_a_scheduled_item_comes_due_when_the_clock_gets_there(
    cq: Querator, qname: str, clock: ManualClock
) -> None:
    make_queue(cq, qname, lease_timeout=30)
    [later] = cq.produce(qname, [Item(payload=b"x", enqueue_at=START + timedelta(hours=2))])
    [item] = cq.list_items(qname)
    assert item.available_at == START + timedelta(hours=2)
    assert cq.stats(qname).scheduled == 1
    clock.advance(hours=1, minutes=59)
    with pytest.raises(RequestTimeout):
        cq.lease(qname, client_id="c1")
    clock.advance(minutes=1)
    assert cq.stats(qname).scheduled == 0
    [leased] = cq.lease(qname, client_id="c1")
    assert leased.id == later
    assert leased.lease_deadline == START + timedelta(hours=2, seconds=30)


def test_items_produced_now_are_due_at_the_clocks_instant(
    cq: Querator, qname: str, clock: ManualClock
) -> None:
    make_queue(cq, qname, lease_timeout=60, expire_timeout=3600)
    cq.produce(qname, [Item(payload=b"now")])
    [item] = cq.list_items(qname)
    assert item.available_at == START
    assert item.expire_at == START + timedelta(hours=1)
    [leased] = cq.lease(qname, client_id="c1")
    assert leased.lease_deadline == START + timedelta(seconds=60)


def test_a_lease_expires_when_the_clock_passes_its_deadline(
    cq: Querator, qname: str, clock: ManualClock
) -> None:
    make_queue(cq, qname, lease_timeout=60)
    cq.produce(qname, [Item(payload=b"x")])
    [first] = cq.lease(qname, client_id="c1")
    clock.advance(59)
    with pytest.raises(RequestTimeout):
        cq.lease(qname, client_id="c2")
    clock.advance(2)
    [second] = cq.lease(qname, client_id="c2")
    assert (second.id, second.attempts, second.client_id) == (first.id, 2, "c2")
    with pytest.raises(Conflict):
        cq.complete(qname, [first])
    cq.complete(qname, [second])


def test_renew_and_retry_count_from_the_clock(cq: Querator, qname: str, clock: ManualClock) -> None:
    make_queue(cq, qname, lease_timeout=60)
    cq.produce(qname, [Item(payload=b"x")])
    [item] = cq.lease(qname, client_id="c1")
    clock.advance(30)
    [renewed] = cq.renew(qname, [item], extend=600)
    assert renewed.lease_deadline == START + timedelta(seconds=630)
    clock.advance(100)
    cq.retry(qname, [renewed])
    [again] = cq.list_items(qname)
    assert again.available_at == START + timedelta(seconds=130)
    assert again.lease_deadline is None


def test_items_expire_and_dead_letter_by_the_clock(
    cq: Querator, qname: str, clock: ManualClock
) -> None:
    dead = make_queue(cq, f"{qname}-dead")
    make_queue(cq, qname, expire_timeout=600, dead_queue=dead)
    [item_id] = cq.produce(qname, [Item(payload=b"x")])
    assert cq.run_maintenance() == 0
    clock.advance(601)
    with pytest.raises(RequestTimeout):
        cq.lease(qname, client_id="c1")
    assert cq.run_maintenance() == 1
    [moved] = cq.list_items(dead)
    assert moved.source_id == item_id


def test_a_waiting_lease_wakes_when_the_clock_moves(
    cq: Querator, qname: str, clock: ManualClock
) -> None:
    make_queue(cq, qname)
    [later] = cq.produce(qname, [Item(payload=b"x", enqueue_at=START + timedelta(days=1))])
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(cq.lease, qname, client_id="c1", timeout=30)
        # The waiter may not have looked yet: advancing before or after its look
        # must both end with the item (the next look sees the new instant).
        clock.advance(days=1)
        assert ids_of(waiting.result(timeout=60)) == [later]


def test_the_system_clock_is_the_stores(backend_url: str, backend_name: str, qname: str) -> None:
    if backend_name.startswith("http"):
        pytest.skip("the library client's default clock; the HTTP client has no clock option")
    with Querator(backend_url, clock=SystemClock()) as q:
        make_queue(q, qname)
        q.produce(qname, [Item(payload=b"x")])
        [item] = q.list_items(qname)
        assert abs(item.available_at - datetime.now(UTC)) < timedelta(minutes=5)


def test_bad_clocks_are_refused(backend_url: str, backend_name: str) -> None:
    if backend_name.startswith("http"):
        pytest.skip("the HTTP client has no clock option")
    with pytest.raises(InvalidArgument, match="clock"):
        Querator(backend_url, clock="now")  # type: ignore[arg-type]
    clock = ManualClock(START)
    with pytest.raises(InvalidArgument, match="backwards"):
        clock.advance(-1)
    with pytest.raises(InvalidArgument, match="before the clock"):
        clock.set(START - timedelta(seconds=1))
    with pytest.raises(InvalidArgument, match="timezone-aware"):
        ManualClock(datetime(2031, 1, 1))
    assert clock.now() == START


def test_one_clock_serves_several_clients(backend_url: str, backend_name: str, qname: str) -> None:
    if backend_name.startswith("http") or backend_name == "memory":
        pytest.skip("two library clients of one store (memory:// stores are per client)")
    clock = ManualClock(START)
    with Querator(backend_url, clock=clock) as a, Querator(backend_url, clock=clock) as b:
        a.create_queue(qname, QueueSettings(lease_timeout=60))
        a.produce(qname, [Item(payload=b"x", enqueue_at=START + timedelta(minutes=5))])
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(b.lease, qname, client_id="b", timeout=30)
            clock.advance(minutes=5)
            [got] = waiting.result(timeout=60)
        assert got.lease_deadline == START + timedelta(minutes=6)
