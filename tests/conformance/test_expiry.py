"""Expiry (design.md, invariant 8): counted from when an item becomes available;
dead queues keep their dead letters unless their settings ask for an expiry."""

from __future__ import annotations

from datetime import timedelta

import pytest

from querator import Item, Querator
from querator.clock import ManualClock
from querator.errors import RequestTimeout
from querator.queue.models import DEFAULT_EXPIRE_TIMEOUT, KEPT

from .helpers import START, later, lease_one, make_queue, same_instant


def test_a_scheduled_items_expiry_counts_from_its_enqueue_at(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=1, expire_timeout=2)
    due = later(3600)
    q.produce(qname, [Item(payload=b"later", enqueue_at=due)])
    [item] = q.list_items(qname)
    assert same_instant(item.expire_at, due + timedelta(seconds=2))


def test_a_scheduled_item_is_never_expired_while_it_waits(
    cq: Querator, qname: str, clock: ManualClock
) -> None:
    dead = make_queue(cq, f"{qname}-dead")
    make_queue(cq, qname, lease_timeout=1, expire_timeout=2, dead_queue=dead)
    [item_id] = cq.produce(qname, [Item(payload=b"x", enqueue_at=START + timedelta(seconds=4))])
    clock.advance(3)
    assert cq.run_maintenance() == 0
    clock.advance(1)
    assert lease_one(cq, qname).id == item_id
    assert cq.stats(dead).total == 0


def test_with_the_default_expiry_an_item_due_in_eight_days_is_kept(
    cq: Querator, qname: str, clock: ManualClock
) -> None:
    make_queue(cq, qname)
    [item_id] = cq.produce(qname, [Item(payload=b"x", enqueue_at=START + timedelta(days=8))])
    clock.advance(days=7, seconds=1)
    assert cq.run_maintenance() == 0
    clock.advance(days=1)
    leased = lease_one(cq, qname)
    assert leased.id == item_id
    assert leased.expire_at == START + timedelta(days=8, seconds=DEFAULT_EXPIRE_TIMEOUT)


def test_an_item_due_in_the_past_expires_counted_from_its_production(
    cq: Querator, qname: str
) -> None:
    make_queue(cq, qname, expire_timeout=600)
    cq.produce(qname, [Item(payload=b"x", enqueue_at=START - timedelta(days=1))])
    [item] = cq.list_items(qname)
    assert item.expire_at == START + timedelta(seconds=600)


def test_a_dead_queue_keeps_its_dead_letters_by_default(
    cq: Querator, qname: str, clock: ManualClock
) -> None:
    dead = make_queue(cq, f"{qname}-dead")
    make_queue(cq, qname, expire_timeout=600, dead_queue=dead)
    [item_id] = cq.produce(qname, [Item(payload=b"x")])
    clock.advance(601)
    assert cq.run_maintenance() == 1
    [moved] = cq.list_items(dead)
    assert moved.expire_at == KEPT
    clock.advance(days=400)
    assert cq.run_maintenance() == 0
    [still] = cq.list_items(dead)
    assert still.source_id == item_id


def test_a_dead_queue_expires_dead_letters_when_its_settings_ask(
    cq: Querator, qname: str, clock: ManualClock
) -> None:
    dead = make_queue(cq, f"{qname}-dead", expire_timeout=3600)
    assert cq.get_queue(dead).settings.dead_letter_expiry == 3600
    make_queue(cq, qname, expire_timeout=600, dead_queue=dead)
    cq.produce(qname, [Item(payload=b"x")])
    clock.advance(601)
    assert cq.run_maintenance() == 1
    [moved] = cq.list_items(dead)
    assert moved.expire_at == START + timedelta(seconds=601 + 3600)
    clock.advance(3600)
    with pytest.raises(RequestTimeout):
        cq.lease(dead, client_id="c1")
    assert cq.run_maintenance() == 1
    assert cq.stats(dead).total == 0


def test_retry_dead_into_a_default_dead_queue_keeps_the_letter(q: Querator, qname: str) -> None:
    dead = make_queue(q, f"{qname}-dead")
    assert q.get_queue(dead).settings.dead_letter_expiry is None
    make_queue(q, qname, lease_timeout=30, dead_queue=dead)
    q.produce(qname, [Item(payload=b"x")])
    q.retry(qname, [lease_one(q, qname)], dead=True)
    [moved] = q.list_items(dead)
    assert moved.expire_at == KEPT
