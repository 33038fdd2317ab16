"""Produce and lease: ids, FIFO order, fields, versions, attempts, dedup."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from querator import Item, Leased, Querator
from querator.errors import RequestTimeout

from .helpers import (
    drain,
    ids_of,
    items,
    lease_one,
    make_queue,
    payloads_of,
    same_instant,
    utcnow,
)


def test_produce_returns_one_distinct_id_per_item_in_order(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    ids = q.produce(qname, items(b"a", b"b", b"c"))
    more = q.produce(qname, items(b"d"))

    assert all(isinstance(i, str) and i for i in ids + more)
    assert len(set(ids + more)) == 4
    assert ids_of(q.list_items(qname)) == ids + more


def test_lease_is_fifo_in_produce_order(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    ids = q.produce(qname, items(b"1", b"2", b"3"))
    ids += q.produce(qname, items(b"4", b"5"))

    got = [lease_one(q, qname) for _ in range(5)]
    assert ids_of(got) == ids
    assert payloads_of(got) == [b"1", b"2", b"3", b"4", b"5"]


def test_lease_batch_returns_up_to_batch_size_in_order(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    ids = q.produce(qname, items(*(bytes([i]) for i in range(7))))

    first = q.lease(qname, client_id="c1", batch_size=3)
    second = q.lease(qname, client_id="c1", batch_size=10)
    assert ids_of(first) == ids[:3]
    assert ids_of(second) == ids[3:]
    with pytest.raises(RequestTimeout):
        q.lease(qname, client_id="c1", batch_size=10)


def test_leased_item_carries_every_field(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=30, expire_timeout=3600)
    item = Item(
        payload=b"\x00\x01binary\xff",
        kind="order.created",
        encoding="json",
        reference="order-42",
        headers={"traceparent": "00-abc-def-01", "note": "h\u00e9llo \u2603"},
        dedup_key="order-42-created",
    )
    before = utcnow()
    (item_id,) = q.produce(qname, [item])
    leased = lease_one(q, qname, client_id="worker.a-1")

    assert isinstance(leased, Leased)
    assert leased.id == item_id
    assert leased.queue == qname
    assert leased.partition == 0
    assert (leased.payload, leased.kind, leased.encoding) == (item.payload, "order.created", "json")
    assert leased.reference == "order-42"
    assert leased.headers == item.headers
    assert leased.dedup_key == "order-42-created"
    assert leased.source_id is None
    assert leased.client_id == "worker.a-1"
    assert leased.attempts == 1
    assert abs((leased.created_at - before).total_seconds()) < 5
    assert 25 < (leased.lease_deadline - utcnow()).total_seconds() <= 31
    assert same_instant(leased.available_at, leased.lease_deadline)
    expected_expiry = leased.created_at + timedelta(seconds=3600)
    assert abs((leased.expire_at - expected_expiry).total_seconds()) < 5


def test_defaults_and_large_payload_round_trip(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    big = bytes(range(256)) * 4096  # 1 MiB
    q.produce(qname, [Item(), Item(payload=big)])
    empty, large = q.lease(qname, client_id="c1", batch_size=2)

    assert empty.payload == b""
    assert (empty.kind, empty.encoding, empty.reference) == ("", "", "")
    assert empty.headers == {}
    assert empty.dedup_key is None
    assert large.payload == big


def test_lease_bumps_version_and_attempts(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    q.produce(qname, items(b"a"))
    (stored,) = q.list_items(qname)
    leased = lease_one(q, qname)

    assert leased.version > stored.version
    assert stored.attempts == 0
    assert leased.attempts == 1
    q.retry(qname, [leased])
    again = lease_one(q, qname)
    assert again.attempts == 2
    assert again.version > leased.version


def test_held_item_is_not_leased_again(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=30)
    a, b = q.produce(qname, items(b"a", b"b"))
    assert lease_one(q, qname, client_id="c1").id == a
    assert lease_one(q, qname, client_id="c2").id == b
    with pytest.raises(RequestTimeout):
        q.lease(qname, client_id="c3", batch_size=10)


def test_empty_queue_raises_request_timeout_at_once(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    started = time.monotonic()
    with pytest.raises(RequestTimeout):
        q.lease(qname, client_id="c1", timeout=0)
    assert time.monotonic() - started < 1.0


def test_lease_waits_its_timeout_before_raising(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    started = time.monotonic()
    with pytest.raises(RequestTimeout):
        q.lease(qname, client_id="c1", timeout=0.4)
    waited = time.monotonic() - started
    assert 0.35 <= waited < 3.0, f"waited {waited:.3f}s for a 0.4s long poll"


def test_enqueue_at_in_the_past_orders_by_available_at(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    (now_id,) = q.produce(qname, items(b"now"))
    (past_id,) = q.produce(qname, items(b"past", enqueue_at=utcnow() - timedelta(hours=1)))

    got = drain(q, qname)
    assert ids_of(got) == [past_id, now_id]


def test_dedup_key_returns_the_held_id_and_adds_nothing(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    (first,) = q.produce(qname, items(b"one", dedup_key="k1"))
    (again,) = q.produce(qname, items(b"two", dedup_key="k1"))
    (other,) = q.produce(qname, items(b"three", dedup_key="k2"))

    assert again == first
    assert other != first
    assert q.stats(qname).total == 2
    assert payloads_of(q.list_items(qname)) == [b"one", b"three"]


def test_dedup_key_holds_while_leased_and_frees_after_complete(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=30)
    (first,) = q.produce(qname, items(b"one", dedup_key="k"))
    leased = lease_one(q, qname)
    assert q.produce(qname, items(b"dup", dedup_key="k")) == [first]

    q.complete(qname, [leased])
    (fresh,) = q.produce(qname, items(b"new", dedup_key="k"))
    assert fresh != first
    assert payloads_of(q.list_items(qname)) == [b"new"]


def test_produce_accepts_the_maximum_batch(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    ids = q.produce(qname, [Item(payload=str(i).encode()) for i in range(1000)])
    assert len(set(ids)) == 1000
    assert q.stats(qname).total == 1000
    got = q.lease(qname, client_id="c1", batch_size=1000)
    assert ids_of(got) == ids
