"""The dead-letter methods of every client (:mod:`querator.interface`):
``dead_letters``, ``dead_letter``, ``requeue`` and ``purge``, with the same
answers and errors on every backend and over HTTP."""

from __future__ import annotations

import pytest

from querator import Item, QueueSettings
from querator.errors import InvalidArgument
from querator.interface import AsyncClient, Client


def dead_lettered(q: Client, queue: str, payloads: list[bytes]) -> list[str]:
    """``queue`` (with a dead queue) holding ``payloads`` as dead letters; their
    source ids, in order."""
    q.create_queue(f"{queue}-dead", QueueSettings())
    q.create_queue(queue, QueueSettings(dead_queue=f"{queue}-dead", lease_timeout=30))
    ids = q.produce(queue, [Item(payload=p) for p in payloads])
    leased = q.lease(queue, client_id="w", batch_size=len(payloads), timeout=5)
    assert sorted(item.id for item in leased) == sorted(ids)
    q.retry(queue, leased, dead=True, reason="poison")
    return ids


def test_dead_letters_are_listed_shown_requeued_and_purged(q: Client, qname: str) -> None:
    sources = dead_lettered(q, qname, [b"a", b"b", b"c"])
    dead = q.dead_letters(qname)
    assert sorted(d.payload for d in dead) == [b"a", b"b", b"c"]
    assert {d.source_id for d in dead} == set(sources)
    assert len(q.dead_letters(qname, limit=2)) == 2
    by_payload = {d.payload: d for d in dead}
    shown = q.dead_letter(qname, by_payload[b"b"].id)
    assert (shown.id, shown.payload) == (by_payload[b"b"].id, b"b")
    assert shown.headers.get("querator-dead-reason") == "poison"

    assert q.requeue(qname, [by_payload[b"a"].id]) == 1
    (back,) = q.lease(qname, client_id="w", timeout=5)
    assert back.payload == b"a"
    assert "querator-dead-reason" not in back.headers
    assert q.purge(qname, [by_payload[b"b"].id]) == 1
    assert [d.payload for d in q.dead_letters(qname)] == [b"c"]
    assert q.requeue(qname) == 1
    assert q.dead_letters(qname) == []
    assert q.purge(qname) == 0


def test_dead_letter_errors_are_the_same_everywhere(q: Client, qname: str) -> None:
    q.create_queue(f"{qname}-plain", QueueSettings())
    dead_lettered(q, qname, [b"x"])
    with pytest.raises(InvalidArgument, match="no dead_queue"):
        q.dead_letters(f"{qname}-plain")
    with pytest.raises(InvalidArgument, match=f"not dead letters of '{qname}': nope"):
        q.requeue(qname, ["nope"])
    with pytest.raises(InvalidArgument, match=f"not dead letters of '{qname}': nope"):
        q.purge(qname, ["nope"])
    with pytest.raises(InvalidArgument, match=f"'nope' is not a dead letter of '{qname}'"):
        q.dead_letter(qname, "nope")
    with pytest.raises(InvalidArgument, match="ids"):
        q.purge(qname, "one-id-not-a-list")
    for limit in (0, -1):
        with pytest.raises(InvalidArgument, match="limit"):
            q.dead_letters(qname, limit=limit)
    assert len(q.dead_letters(qname)) == 1  # nothing was touched


@pytest.mark.anyio
async def test_the_async_clients_have_them_too(aq: AsyncClient, qname: str) -> None:
    await aq.create_queue(f"{qname}-dead", QueueSettings())
    await aq.create_queue(qname, QueueSettings(dead_queue=f"{qname}-dead", lease_timeout=30))
    await aq.produce(qname, [Item(payload=b"p")])
    leased = await aq.lease(qname, client_id="w", timeout=5)
    await aq.retry(qname, leased, dead=True)
    (dead,) = await aq.dead_letters(qname)
    assert (await aq.dead_letter(qname, dead.id)).payload == b"p"
    assert await aq.requeue(qname, [dead.id]) == 1
    assert await aq.dead_letters(qname) == []
    assert await aq.purge(qname) == 0


def test_dead_letters_and_requeued_items_keep_their_priority(q: Client, qname: str) -> None:
    q.create_queue(f"{qname}-dead", QueueSettings())
    q.create_queue(qname, QueueSettings(dead_queue=f"{qname}-dead", max_attempts=1))
    q.produce(qname, [Item(payload=b"urgent", priority=7), Item(payload=b"low", priority=-3)])
    leased = q.lease(qname, client_id="w", batch_size=2, timeout=5)
    assert [item.priority for item in leased] == [7, -3]
    q.retry(qname, leased)  # out of attempts: both go to the dead queue
    dead = {d.payload: d for d in q.dead_letters(qname)}
    assert {payload: d.priority for payload, d in dead.items()} == {b"urgent": 7, b"low": -3}
    q.produce(qname, [Item(payload=b"plain")])
    assert q.requeue(qname) == 2
    again = q.lease(qname, client_id="w", batch_size=3, timeout=5)
    assert [(item.payload, item.priority) for item in again] == [
        (b"urgent", 7),
        (b"plain", 0),
        (b"low", -3),
    ]
