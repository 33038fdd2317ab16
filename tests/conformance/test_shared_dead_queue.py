"""Queues that share one dead queue: each dead letter names the queue it came
from (:data:`~querator.queue.dead_reasons.SOURCE_HEADER`, written by the
statement that moves it), and ``dead_letters``, ``dead_letter``, ``requeue``
and ``purge`` of one queue touch only its own letters."""

from __future__ import annotations

from typing import Any

import pytest

from querator import Item, Querator, QueueSettings
from querator.clock import ManualClock
from querator.errors import InvalidArgument
from querator.interface import Client
from querator.queue.dead_reasons import SOURCE_HEADER


def shared(q: Client, qname: str, **settings: Any) -> tuple[str, str, str]:
    """Queues ``a`` and ``b`` of ``qname`` sharing one dead queue: (a, b, dead)."""
    dead = f"{qname}-dead"
    q.create_queue(dead, QueueSettings())
    for name in (f"{qname}-a", f"{qname}-b"):
        q.create_queue(name, QueueSettings(dead_queue=dead, lease_timeout=30, **settings))
    return f"{qname}-a", f"{qname}-b", dead


def kill(q: Client, queue: str, payloads: list[bytes]) -> None:
    """Produce ``payloads`` to ``queue`` and dead-letter them by retry(dead=True)."""
    q.produce(queue, [Item(payload=p) for p in payloads])
    leased = q.lease(queue, client_id="w", batch_size=len(payloads), timeout=5)
    assert len(leased) == len(payloads)
    q.retry(queue, leased, dead=True, reason="poison")


def payloads(q: Client, queue: str) -> list[bytes]:
    return sorted(item.payload for item in q.dead_letters(queue))


def test_each_queue_lists_only_its_own_dead_letters(q: Client, qname: str) -> None:
    a, b, dead = shared(q, qname)
    kill(q, a, [b"a1", b"a2"])
    kill(q, b, [b"b1"])
    assert payloads(q, a) == [b"a1", b"a2"]
    assert payloads(q, b) == [b"b1"]
    assert {i.headers[SOURCE_HEADER] for i in q.dead_letters(a)} == {a}
    assert [i.headers[SOURCE_HEADER] for i in q.dead_letters(b)] == [b]
    assert len(q.dead_letters(a, limit=1)) == 1
    [b_letter] = q.dead_letters(b)
    assert q.dead_letter(b, b_letter.id).payload == b"b1"
    with pytest.raises(InvalidArgument, match=f"is not a dead letter of '{a}'"):
        q.dead_letter(a, b_letter.id)
    assert len(q.list_items(dead)) == 3  # the dead queue itself holds all


def test_requeue_sends_only_the_queues_own_letters_back_to_it(q: Client, qname: str) -> None:
    a, b, _ = shared(q, qname)
    kill(q, a, [b"a1"])
    kill(q, b, [b"b1", b"b2"])
    [b_letter, _] = q.dead_letters(b)
    with pytest.raises(InvalidArgument, match=f"not dead letters of '{a}'"):
        q.requeue(a, [b_letter.id])
    assert q.requeue(a) == 1
    assert [item.payload for item in q.lease(a, client_id="w", batch_size=10, timeout=5)] == [b"a1"]
    assert payloads(q, b) == [b"b1", b"b2"]  # untouched, not sent into a
    assert q.requeue(b, [b_letter.id]) == 1
    [back] = q.lease(b, client_id="w", timeout=5)
    assert back.payload == b_letter.payload and SOURCE_HEADER not in back.headers


def test_purge_deletes_only_the_queues_own_letters(q: Client, qname: str) -> None:
    a, b, _ = shared(q, qname)
    kill(q, a, [b"a1"])
    kill(q, b, [b"b1"])
    [a_letter] = q.dead_letters(a)
    with pytest.raises(InvalidArgument, match=f"not dead letters of '{b}'"):
        q.purge(b, [a_letter.id])
    assert q.purge(b) == 1
    assert payloads(q, a) == [b"a1"] and payloads(q, b) == []


def test_used_up_attempts_name_their_queue(q: Client, qname: str) -> None:
    a, b, _ = shared(q, qname, max_attempts=1)
    for queue in (a, b):
        q.produce(queue, [Item(payload=queue.encode())])
        q.retry(queue, q.lease(queue, client_id="w", timeout=5))  # its one attempt: dead
    assert payloads(q, a) == [a.encode()] and payloads(q, b) == [b.encode()]


def test_the_sweep_names_the_queue(cq: Querator, qname: str, clock: ManualClock) -> None:
    a, b, dead = shared(cq, qname, expire_timeout=60)
    cq.produce(a, [Item(payload=b"a")])
    cq.produce(b, [Item(payload=b"b")])
    clock.advance(61)
    cq.run_maintenance()
    assert sorted(i.headers[SOURCE_HEADER] for i in cq.list_items(dead)) == [a, b]
    assert payloads(cq, a) == [b"a"] and payloads(cq, b) == [b"b"]


def test_a_letter_that_names_no_source_counts_for_every_sharer(q: Client, qname: str) -> None:
    """A letter written before sources were recorded (no header, no source id)
    stays visible, as it was, from each queue that shares the dead queue."""
    a, b, dead = shared(q, qname)
    q.produce(dead, [Item(payload=b"old")])
    kill(q, a, [b"a1"])
    assert payloads(q, a) == [b"a1", b"old"] and payloads(q, b) == [b"old"]
