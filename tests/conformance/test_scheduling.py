"""Scheduled delivery: enqueue_at hides an item until due, then it leases in order."""

from __future__ import annotations

import time

import pytest

from querator import Leased, Querator
from querator.errors import RequestTimeout

from .helpers import drain, ids_of, items, later, make_queue, utcnow


def test_scheduled_items_are_invisible_until_due(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    due = later(0.6)
    s1, s2 = q.produce(qname, items(b"s1", b"s2", enqueue_at=due))
    (now_id,) = q.produce(qname, items(b"now"))

    assert ids_of(q.lease(qname, client_id="c1", batch_size=10)) == [now_id]
    with pytest.raises(RequestTimeout):
        q.lease(qname, client_id="c1", batch_size=10)
    assert ids_of(q.list_scheduled(qname)) == [s1, s2]
    assert q.stats(qname).scheduled == 2

    got = q.lease(qname, client_id="c1", batch_size=10, timeout=5)
    returned = time.time()
    lateness = returned - due.timestamp()
    assert ids_of(got) == [s1, s2]
    assert lateness >= -0.05, f"leased {-lateness:.3f}s before the item was due"
    assert lateness < 1.0, f"scheduled item leased {lateness:.3f}s after it was due"
    assert q.stats(qname).scheduled == 0


def test_scheduled_items_lease_by_due_time_then_produce_order(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    (late,) = q.produce(qname, items(b"late", enqueue_at=later(0.5)))
    (early,) = q.produce(qname, items(b"early", enqueue_at=later(0.3)))
    early_due = q.list_items(qname)[1].available_at
    (tie,) = q.produce(qname, items(b"early-2", enqueue_at=early_due))

    got: list[Leased] = []
    while len(got) < 3:
        got += q.lease(qname, client_id="c1", batch_size=10, timeout=5)
    assert ids_of(got) == [early, tie, late]


def test_list_scheduled_pages_with_inclusive_pivot(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    q.produce(qname, items(b"now-1"))
    ids = q.produce(qname, items(b"a", b"b", b"c", b"d", enqueue_at=later(3600)))
    q.produce(qname, items(b"now-2"))

    assert ids_of(q.list_scheduled(qname)) == ids
    assert ids_of(q.list_scheduled(qname, limit=2)) == ids[:2]
    assert ids_of(q.list_scheduled(qname, pivot=ids[2], limit=5)) == ids[2:]
    assert all(s.available_at > utcnow() for s in q.list_scheduled(qname))


def test_scheduled_item_is_not_in_list_scheduled_once_due(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    (item_id,) = q.produce(qname, items(b"x", enqueue_at=later(0.3)))
    assert ids_of(q.list_scheduled(qname)) == [item_id]
    got = q.lease(qname, client_id="c1", timeout=5)
    assert ids_of(got) == [item_id]
    assert q.list_scheduled(qname) == []
    assert drain(q, qname) == []
