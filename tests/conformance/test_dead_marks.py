"""A dead letter keeps the attempts its item had and why it was dead-lettered
(two headers, :mod:`querator.queue.dead_reasons`); requeueing drops them."""

from __future__ import annotations

import pytest

from querator import Item, Querator
from querator.clock import ManualClock
from querator.errors import InvalidArgument
from querator.queue.dead_letters import requeue
from querator.queue.dead_reasons import (
    ATTEMPTS_HEADER,
    EXPIRED,
    MAX_REASON,
    REASON_HEADER,
    exhausted,
)

from .helpers import lease_one, make_queue


def marks(q: Querator, dead: str) -> tuple[str, str]:
    [letter] = q.list_items(dead)
    assert letter.attempts == 0  # its own leases, in the dead queue
    return letter.headers[ATTEMPTS_HEADER], letter.headers[REASON_HEADER]


def test_retry_dead_keeps_the_attempts_and_the_reason(q: Querator, qname: str) -> None:
    dead = make_queue(q, f"{qname}-dead")
    make_queue(q, qname, lease_timeout=30, dead_queue=dead)
    q.produce(qname, [Item(payload=b"x", headers={"h": "v"})])
    q.retry(qname, [lease_one(q, qname)])
    q.retry(qname, [lease_one(q, qname)], dead=True, reason="ValueError: no such order")
    assert marks(q, dead) == ("2", "ValueError: no such order")
    [letter] = q.list_items(dead)
    assert letter.headers["h"] == "v"


def test_used_up_attempts_are_the_reason_when_none_is_given(q: Querator, qname: str) -> None:
    dead = make_queue(q, f"{qname}-dead")
    make_queue(q, qname, lease_timeout=30, max_attempts=2, dead_queue=dead)
    q.produce(qname, [Item(payload=b"x")])
    q.retry(qname, [lease_one(q, qname)])
    q.retry(qname, [lease_one(q, qname)])
    assert marks(q, dead) == ("2", exhausted(2))


def test_a_requeued_dead_letter_leaves_the_marks_behind(q: Querator, qname: str) -> None:
    dead = make_queue(q, f"{qname}-dead")
    make_queue(q, qname, lease_timeout=30, dead_queue=dead)
    q.produce(qname, [Item(payload=b"x", headers={"h": "v"})])
    q.retry(qname, [lease_one(q, qname)], dead=True, reason="bad")
    assert requeue(q, qname) == 1
    assert lease_one(q, qname).headers == {"h": "v"}


def test_a_reason_is_a_str_and_a_long_one_is_cut(q: Querator, qname: str) -> None:
    dead = make_queue(q, f"{qname}-dead")
    make_queue(q, qname, lease_timeout=30, dead_queue=dead)
    q.produce(qname, [Item(payload=b"x")])
    leased = lease_one(q, qname)
    with pytest.raises(InvalidArgument) as error:
        q.retry(qname, [leased], dead=True, reason=42)  # type: ignore[arg-type]
    assert error.value.field == "reason"
    q.retry(qname, [leased], dead=True, reason="Traceback\x00" + "x" * 5_000)
    _, reason = marks(q, dead)
    assert len(reason) == MAX_REASON and reason.startswith("Tracebackxxx")


def test_the_sweep_says_expired_or_used_up(cq: Querator, qname: str, clock: ManualClock) -> None:
    dead = make_queue(cq, f"{qname}-dead")
    make_queue(cq, qname, lease_timeout=60, expire_timeout=600, max_attempts=1, dead_queue=dead)
    cq.produce(qname, [Item(payload=b"never leased")])
    lease_one(cq, qname)  # the one attempt; its lease then expires
    cq.produce(qname, [Item(payload=b"stale")])
    clock.advance(61)
    cq.produce(qname, [Item(payload=b"fresh")])
    cq.run_maintenance()  # (a client's own maintenance may have run already)
    assert [i.payload for i in cq.list_items(dead)] == [b"never leased"]
    clock.advance(601)
    cq.run_maintenance()
    found = {
        i.payload: (i.headers[ATTEMPTS_HEADER], i.headers[REASON_HEADER])
        for i in cq.list_items(dead)
    }
    assert found == {
        b"never leased": ("1", exhausted(1)),
        b"stale": ("0", EXPIRED),
        b"fresh": ("0", EXPIRED),
    }
