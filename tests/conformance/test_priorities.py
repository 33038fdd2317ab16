"""Priorities: among ready items, a higher priority is leased first; FIFO within
one priority; an item scheduled for later waits its turn whatever its priority;
a bad priority is refused before anything is written."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import pytest

from querator import Item, Querator, StoredItem
from querator.clock import ManualClock
from querator.errors import InvalidArgument

from .helpers import drain, make_queue


def _payloads(leased: Sequence[StoredItem]) -> list[bytes]:
    return [item.payload for item in leased]


def test_higher_priorities_are_leased_first_and_fifo_within_one(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    q.produce(qname, [Item(payload=f"zero {n}".encode()) for n in range(3)])
    q.produce(qname, [Item(payload=f"low {n}".encode(), priority=-2) for n in range(2)])
    q.produce(
        qname,
        [
            Item(payload=b"high 0", priority=5),
            Item(payload=b"top", priority=32_767),
            Item(payload=b"high 1", priority=5),
            Item(payload=b"one", priority=1),
            Item(payload=b"bottom", priority=-32_768),
        ],
    )

    first = q.lease(qname, client_id="c1", batch_size=3)
    rest = drain(q, qname)

    assert _payloads(first) == [b"top", b"high 0", b"high 1"]
    assert _payloads(rest) == [
        b"one",
        b"zero 0",
        b"zero 1",
        b"zero 2",
        b"low 0",
        b"low 1",
        b"bottom",
    ]
    assert [item.priority for item in first] == [32_767, 5, 5]
    assert [item.priority for item in rest] == [1, 0, 0, 0, -2, -2, -32_768]


def test_an_item_keeps_its_priority_when_listed_and_when_retried(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    urgent = q.produce(qname, [Item(payload=b"urgent", priority=9)])[0]
    q.produce(qname, [Item(payload=b"plain")])
    assert {item.id: item.priority for item in q.list_items(qname)}[urgent] == 9

    leased = q.lease(qname, client_id="c1")
    assert [item.id for item in leased] == [urgent]
    q.retry(qname, leased)  # back among the ready items, still before priority 0

    again = q.lease(qname, client_id="c2", batch_size=2)
    assert _payloads(again) == [b"urgent", b"plain"]
    assert again[0].priority == 9 and again[0].attempts == 2


def test_a_lease_of_some_kinds_takes_their_highest_priority_first(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    q.produce(
        qname,
        [
            Item(payload=b"a plain", kind="a"),
            Item(payload=b"b urgent", kind="b", priority=8),
            Item(payload=b"a urgent", kind="a", priority=3),
        ],
    )
    got = q.lease(qname, client_id="c1", batch_size=5, kinds=["a"])
    assert _payloads(got) == [b"a urgent", b"a plain"]


def test_a_high_priority_item_scheduled_for_later_waits_until_it_is_due(
    cq: Querator, qname: str, clock: ManualClock
) -> None:
    make_queue(cq, qname)
    cq.produce(
        qname,
        [
            Item(
                payload=f"later {n}".encode(),
                priority=7,
                enqueue_at=clock.now() + timedelta(hours=1),
            )
            for n in range(3)
        ],
    )
    cq.produce(qname, [Item(payload=b"plain 0"), Item(payload=b"plain 1")])

    first = cq.lease(qname, client_id="c1")
    assert _payloads(first) == [b"plain 0"]
    cq.complete(qname, first)
    clock.advance(hours=1)
    got = cq.lease(qname, client_id="c1", batch_size=5)
    assert _payloads(got) == [b"later 0", b"later 1", b"later 2", b"plain 1"]


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        (True, "must be an int, got bool"),
        (1.0, "must be an int, got float"),
        ("1", "must be an int, got str"),
        (None, "must be an int, got NoneType"),
        (32_768, "must be from -32768 to 32767, got 32768"),
        (-32_769, "must be from -32768 to 32767, got -32769"),
    ],
)
def test_a_bad_priority_is_refused_before_anything_is_written(
    q: Querator, qname: str, value: object, rule: str
) -> None:
    make_queue(q, qname)
    with pytest.raises(InvalidArgument) as refused:
        q.produce(qname, [Item(payload=b"ok"), Item(payload=b"bad", priority=value)])  # type: ignore[arg-type]
    assert (refused.value.field, refused.value.rule) == ("priority", rule)
    assert sum(p.total for p in q.stats(qname).partitions) == 0
