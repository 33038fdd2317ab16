"""The HTTP clients' dead-letter methods (``dead_letters``, ``dead_letter``,
``requeue``, ``purge``): the library's semantics over ``/v1/dead.*`` against a
live server."""

from __future__ import annotations

import anyio
import pytest

from querator import Item, QueueSettings
from querator.errors import InvalidArgument
from querator.http import AsyncQuerator, Querator


def dead_lettered(q: Querator, queue: str, payloads: list[bytes]) -> list[str]:
    """``queue`` (with a dead queue) holding ``payloads`` as dead letters; their ids."""
    q.create_queue(f"{queue}-dead", QueueSettings())
    q.create_queue(queue, QueueSettings(dead_queue=f"{queue}-dead"))
    q.produce(queue, [Item(payload=p) for p in payloads])
    leased = q.lease(queue, client_id="w", batch_size=len(payloads), timeout=5)
    q.retry(queue, leased, dead=True, reason="poison")
    return [item.id for item in leased]


def test_dead_letters_are_listed_shown_requeued_and_purged(server: str) -> None:
    with Querator(server) as q:
        sources = dead_lettered(q, "jobs", [b"a", b"b", b"c"])
        dead = q.dead_letters("jobs")
        assert [d.payload for d in dead] == [b"a", b"b", b"c"]
        assert [d.source_id for d in dead] == sources
        assert [d.payload for d in q.dead_letters("jobs", limit=2)] == [b"a", b"b"]
        shown = q.dead_letter("jobs", dead[1].id)
        assert (shown.id, shown.payload, shown.source_id) == (dead[1].id, b"b", sources[1])

        assert q.requeue("jobs", [dead[0].id]) == 1
        [back] = q.lease("jobs", client_id="w", timeout=5)
        assert back.payload == b"a"
        assert q.purge("jobs", [dead[1].id]) == 1
        assert [d.payload for d in q.dead_letters("jobs")] == [b"c"]
        assert q.requeue("jobs") == 1
        assert q.dead_letters("jobs") == []
        assert q.purge("jobs") == 0


def test_dead_letter_errors_are_the_librarys(server: str) -> None:
    with Querator(server) as q:
        q.create_queue("plain", QueueSettings())
        dead_lettered(q, "work", [b"x"])
        with pytest.raises(InvalidArgument, match="no dead_queue"):
            q.dead_letters("plain")
        with pytest.raises(InvalidArgument, match="not dead letters of 'work': nope"):
            q.requeue("work", ["nope"])
        with pytest.raises(InvalidArgument, match="not dead letters of 'work': nope"):
            q.purge("work", ["nope"])
        with pytest.raises(InvalidArgument, match="'nope' is not a dead letter of 'work'"):
            q.dead_letter("work", "nope")
        with pytest.raises(InvalidArgument, match="ids"):
            q.purge("work", "one-id-not-a-list")
        with pytest.raises(InvalidArgument, match="limit"):
            q.dead_letters("work", limit=0)
        assert len(q.dead_letters("work")) == 1  # nothing was touched


def test_the_async_client_has_them_too(server: str) -> None:
    async def main() -> None:
        async with AsyncQuerator(server) as aq:
            await aq.create_queue("async-dead", QueueSettings())
            await aq.create_queue("async", QueueSettings(dead_queue="async-dead"))
            await aq.produce("async", [Item(payload=b"p")])
            leased = await aq.lease("async", client_id="w", timeout=5)
            await aq.retry("async", leased, dead=True)
            [dead] = await aq.dead_letters("async")
            assert (await aq.dead_letter("async", dead.id)).payload == b"p"
            assert await aq.purge("async") == 1
            assert await aq.dead_letters("async") == []

    anyio.run(main)
