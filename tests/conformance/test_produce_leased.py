"""transact(produce_leased=...): produce items already leased to the caller."""

from __future__ import annotations

import pytest

from querator import Item, Querator
from querator.errors import Conflict, InvalidArgument, RequestTimeout

from .helpers import commit, items, later, lease_one, make_queue, payloads_of, utcnow


def test_produced_items_come_back_leased(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=30)
    result = commit(q, produce_leased={qname: items(b"a", b"b")}, client_id="me")

    first, second = result.leased[qname]
    assert first is not None and second is not None
    assert [first.payload, second.payload] == [b"a", b"b"]
    assert {first.client_id, second.client_id} == {"me"}
    assert first.attempts == 1
    assert 25 < (first.lease_deadline - utcnow()).total_seconds() <= 31
    assert result.produced == {}
    # Held: nobody else can lease them, and they count as leased.
    with pytest.raises(RequestTimeout):
        q.lease(qname, client_id="other", batch_size=10)
    assert q.stats(qname).leased == 2
    # The caller finishes them like any leased item.
    q.complete(qname, [first, second])
    assert q.stats(qname).total == 0


def test_lease_of_a_produced_item_expires_like_any_lease(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=0.3)
    [mine] = commit(q, produce_leased={qname: items(b"a")}, client_id="me").leased[qname]
    assert mine is not None
    [again] = q.lease(qname, client_id="other", timeout=10)
    assert again.id == mine.id
    assert again.attempts == 2
    with pytest.raises(Conflict):
        q.complete(qname, [mine])


def test_atomic_with_the_rest_of_the_transaction(q: Querator, qname: str) -> None:
    src, dst = make_queue(q, f"{qname}-src"), make_queue(q, f"{qname}-dst")
    q.produce(src, items(b"step-1"))
    leased = lease_one(q, src)
    q.complete(src, [leased])
    with pytest.raises(Conflict):
        commit(q, complete=[leased], produce_leased={dst: items(b"next")}, client_id="me")
    assert q.stats(dst).total == 0

    q.produce(src, items(b"step-1b"))
    fresh = lease_one(q, src)
    result = commit(q, complete=[fresh], produce_leased={dst: items(b"next")}, client_id="me")
    [next_item] = result.leased[dst]
    assert next_item is not None and next_item.payload == b"next"
    assert q.stats(src).total == 0


def test_scheduled_items_are_produced_but_not_leased(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    result = commit(
        q, produce_leased={qname: [Item(payload=b"later", enqueue_at=later(3600))]}, client_id="me"
    )
    assert result.leased[qname] == [None]
    assert payloads_of(q.list_scheduled(qname)) == [b"later"]


def test_dedup_hit_on_a_held_item_is_not_leased(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    q.produce(qname, items(b"first", dedup_key="k"))
    held = lease_one(q, qname, client_id="other")
    result = commit(q, produce_leased={qname: items(b"second", dedup_key="k")}, client_id="me")
    assert result.leased[qname] == [None]
    q.complete(qname, [held])  # still the other client's


def test_dedup_hit_on_a_waiting_item_leases_it(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    [item_id] = q.produce(qname, items(b"first", dedup_key="k"))
    [mine] = commit(
        q, produce_leased={qname: items(b"second", dedup_key="k")}, client_id="me"
    ).leased[qname]
    assert mine is not None
    assert (mine.id, mine.payload, mine.client_id) == (item_id, b"first", "me")


def test_mixes_with_plain_produce_in_one_call(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    result = commit(
        q,
        produce={qname: items(b"for-anyone")},
        produce_leased={qname: items(b"for-me")},
        client_id="me",
    )
    [mine] = result.leased[qname]
    assert mine is not None and mine.payload == b"for-me"
    [other] = q.lease(qname, client_id="other", batch_size=10)
    assert other.payload == b"for-anyone"
    assert other.id == result.produced[qname][0]


def test_client_id_is_required_and_checked(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    with pytest.raises(InvalidArgument, match="client_id"):
        commit(q, produce_leased={qname: items(b"a")})
    with pytest.raises(InvalidArgument, match="client_id"):
        commit(q, produce_leased={qname: items(b"a")}, client_id="bad name!")
    with pytest.raises(InvalidArgument, match="produce_leased"):
        commit(q, produce_leased={qname: []}, client_id="me")
    assert q.stats(qname).total == 0


def test_items_of_every_partition_come_back_leased_in_order(q: Querator, qname: str) -> None:
    make_queue(q, qname, partitions=4)
    batch = [Item(payload=str(n).encode(), partition_key=f"k{n}") for n in range(12)]
    batch.append(Item(payload=b"keyed", dedup_key="d1", partition_key="k3"))
    result = commit(q, produce_leased={qname: batch}, client_id="me")
    got = result.leased[qname]
    assert all(item is not None for item in got)
    assert [item.payload for item in got if item is not None] == [i.payload for i in batch]
    assert len({item.partition for item in got if item is not None}) > 1
    assert q.stats(qname).leased == 13
