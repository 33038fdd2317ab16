"""lease(..., complete=previous_batch): a consumer that loops completes its last
batch and leases the next in one call; the complete is all or nothing and runs
before the lease looks."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from querator import AsyncQuerator, Item, Leased, Querator, QueueSettings
from querator.errors import Conflict, ConflictReason, InvalidArgument, RequestTimeout

from .helpers import ids_of, items, make_queue


def loop_consumer(q: Querator, queue: str, batch_size: int) -> list[Leased]:
    """Lease batches, each call completing the previous one, until none is left;
    then complete the last. Returns every item leased."""
    seen: list[Leased] = []
    previous: list[Leased] = []
    while True:
        try:
            batch = q.lease(queue, client_id="loop", batch_size=batch_size, complete=previous)
        except RequestTimeout:
            return seen
        seen += batch
        previous = batch


@pytest.mark.parametrize("partitions", [1, 3])
def test_a_loop_consumer_completes_each_batch_with_the_next_lease(
    q: Querator, qname: str, partitions: int
) -> None:
    make_queue(q, qname, partitions=partitions)
    produced = q.produce(qname, items(*[f"{n}".encode() for n in range(9)]))

    seen = loop_consumer(q, qname, batch_size=2)

    assert sorted(ids_of(seen)) == sorted(produced)
    assert q.stats(qname).total == 0  # the last batch went with the lease that timed out


def test_the_completed_batch_is_gone_and_the_next_is_held(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    a, b, c, d = q.produce(qname, items(b"a", b"b", b"c", b"d"))
    first = q.lease(qname, client_id="c1", batch_size=2)

    second = q.lease(qname, client_id="c1", batch_size=2, complete=first)

    assert ids_of(first) == [a, b]
    assert ids_of(second) == [c, d]
    assert [s.id for s in q.list_items(qname)] == [c, d]
    assert q.stats(qname).leased == 2
    q.complete(qname, second)
    assert q.stats(qname).total == 0


def test_a_failed_complete_leases_nothing_and_completes_nothing(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    q.produce(qname, items(b"a", b"b", b"c"))
    a, b = q.lease(qname, client_id="c1", batch_size=2)
    q.complete(qname, [a])

    with pytest.raises(Conflict) as err:
        q.lease(qname, client_id="c1", complete=[a, b])

    assert err.value.reasons == {a.id: ConflictReason.MISSING}
    stats = q.stats(qname)
    assert (stats.total, stats.leased) == (2, 1)  # b still held, c not leased
    q.complete(qname, [b])


def test_a_stale_version_is_refused(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    q.produce(qname, items(b"a", b"b"))
    (a,) = q.lease(qname, client_id="c1")
    q.renew(qname, [a], extend=60)

    with pytest.raises(Conflict) as err:
        q.lease(qname, client_id="c1", complete=[a])

    assert err.value.reasons == {a.id: ConflictReason.STALE}
    assert q.stats(qname).leased == 1


def test_the_complete_holds_when_the_lease_then_times_out(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    q.produce(qname, items(b"a"))
    leased = q.lease(qname, client_id="c1")

    with pytest.raises(RequestTimeout):
        q.lease(qname, client_id="c1", complete=leased)

    assert q.stats(qname).total == 0


def test_a_waiting_lease_completes_first_then_waits(
    q: Querator, q2: Querator, qname: str, pool: ThreadPoolExecutor
) -> None:
    make_queue(q, qname)
    q.produce(qname, items(b"a"))
    leased = q.lease(qname, client_id="c1")
    waiting = pool.submit(q.lease, qname, client_id="c1", timeout=30, complete=leased)
    q2.produce(qname, items(b"b"))

    (b,) = waiting.result(timeout=30)

    assert b.payload == b"b"
    assert [s.id for s in q.list_items(qname)] == [b.id]


def test_a_priority_queue_completes_and_leases_highest_first(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    q.produce(qname, [Item(payload=b"low", priority=-1), Item(payload=b"high", priority=3)])
    q.produce(qname, items(b"zero"))
    first = q.lease(qname, client_id="c1")

    second = q.lease(qname, client_id="c1", complete=first)
    third = q.lease(qname, client_id="c1", complete=second)

    assert [x.payload for x in first + second + third] == [b"high", b"zero", b"low"]
    assert [s.payload for s in q.list_items(qname)] == [b"low"]


def test_items_of_another_queue_are_refused_before_anything_is_leased(
    q: Querator, qname: str
) -> None:
    other = make_queue(q, qname + "-other")
    make_queue(q, qname)
    q.produce(other, items(b"x"))
    q.produce(qname, items(b"a"))
    foreign = q.lease(other, client_id="c1")

    with pytest.raises(InvalidArgument):
        q.lease(qname, client_id="c1", complete=foreign)

    assert q.stats(qname).leased == 0
    assert q.stats(other).leased == 1


@pytest.mark.anyio
async def test_an_async_loop_consumer_completes_each_batch_with_the_next_lease(
    aq: AsyncQuerator, qname: str
) -> None:
    await aq.create_queue(qname, QueueSettings(partitions=2))
    produced = await aq.produce(qname, [Item(payload=f"{n}".encode()) for n in range(7)])
    seen: list[Leased] = []
    previous: list[Leased] = []
    while True:
        try:
            previous = await aq.lease(qname, client_id="c1", batch_size=3, complete=previous)
        except RequestTimeout:
            break
        seen += previous

    assert sorted(ids_of(seen)) == sorted(produced)
    assert (await aq.stats(qname)).total == 0
    with pytest.raises(Conflict):
        await aq.lease(qname, client_id="c1", complete=seen[:1])
