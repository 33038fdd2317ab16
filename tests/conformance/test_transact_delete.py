"""transact(delete=...): delete items not held by a live lease, at their versions,
atomically with the rest of the transaction (a task's cancel before it starts)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from querator import Item, Querator, Ref
from querator.clock import ManualClock
from querator.errors import Conflict, ConflictReason, InvalidArgument, RequestTimeout

from .helpers import items, later, lease_one, make_queue, payloads_of


def test_an_unleased_item_is_deleted_with_the_rest(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    out = make_queue(q, f"{qname}-out")
    q.produce(qname, items(b"now", b"later"))
    q.produce(qname, [Item(payload=b"scheduled", enqueue_at=later(3600))])
    now, _, scheduled = q.list_items(qname)
    refs = [Ref(qname, now.id, now.version), Ref(qname, scheduled.id, scheduled.version)]
    q.transact(delete=refs, produce={out: items(b"cancelled")})
    assert payloads_of(q.list_items(qname)) == [b"later"]
    assert payloads_of(q.list_items(out)) == [b"cancelled"]


def test_a_leased_item_is_not_deleted_and_nothing_happens(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=30)
    out = make_queue(q, f"{qname}-out")
    q.produce(qname, items(b"a", b"b"))
    held = lease_one(q, qname)
    (free,) = [i for i in q.list_items(qname) if i.id != held.id]
    with pytest.raises(Conflict) as err:
        q.transact(
            delete=[Ref(qname, held.id, held.version), Ref(qname, free.id, free.version)],
            produce={out: items(b"never")},
        )
    assert err.value.reasons == {held.id: ConflictReason.LEASED}
    assert {i.id for i in q.list_items(qname)} == {held.id, free.id}
    assert q.stats(out).total == 0
    q.complete(qname, [held])  # still held under its version


def test_an_item_leased_since_it_was_read_is_stale(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=30)
    q.produce(qname, items(b"a"))
    (read,) = q.list_items(qname)
    leased = lease_one(q, qname)  # a consumer takes it after the read
    with pytest.raises(Conflict) as err:
        q.transact(delete=[Ref(qname, read.id, read.version)])
    assert err.value.reasons == {read.id: ConflictReason.STALE}
    q.complete(qname, [leased])


def test_a_missing_item_is_named(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    q.produce(qname, items(b"a"))
    (read,) = q.list_items(qname)
    q.transact(delete=[Ref(qname, read.id, read.version)])
    with pytest.raises(Conflict) as err:
        q.transact(delete=[Ref(qname, read.id, read.version)])
    assert err.value.reasons == {read.id: ConflictReason.MISSING}


def test_an_item_whose_lease_expired_can_be_deleted(
    cq: Querator, qname: str, clock: ManualClock
) -> None:
    make_queue(cq, qname, lease_timeout=30)
    cq.produce(qname, items(b"a"))
    lease_one(cq, qname)
    clock.advance(31)
    (expired,) = cq.list_items(qname)
    cq.transact(delete=[Ref(qname, expired.id, expired.version)])
    assert cq.list_items(qname) == []


def test_an_item_in_two_roles_is_invalid(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    q.produce(qname, items(b"a"))
    (read,) = q.list_items(qname)
    ref = Ref(qname, read.id, read.version)
    with pytest.raises(InvalidArgument):
        q.transact(delete=[ref], depends=[ref])
    with pytest.raises(InvalidArgument, match="delete"):
        q.transact(delete="not a list")  # type: ignore[arg-type]
    assert q.stats(qname).total == 1


def test_deletes_racing_leases_never_take_a_leased_item(q: Querator, qname: str) -> None:
    """A consumer leases while another client deletes each item at the version
    it read: every item is either leased or deleted, never both."""
    make_queue(q, qname, lease_timeout=60)
    q.produce(qname, items(*(f"{n}".encode() for n in range(60))))
    stored = q.list_items(qname, limit=100)
    start = threading.Barrier(2)

    def consume() -> list[str]:
        start.wait()
        taken: list[str] = []
        while True:
            try:
                batch = q.lease(qname, client_id="consumer", batch_size=3)
            except RequestTimeout:
                return taken
            taken += [item.id for item in batch]
            q.complete(qname, batch)  # the lease was never broken by a delete

    def delete() -> list[str]:
        start.wait()
        deleted = []
        for item in stored:
            try:
                q.transact(delete=[Ref(qname, item.id, item.version)])
            except Conflict as exc:
                assert set(exc.reasons.values()) <= {
                    ConflictReason.STALE,
                    ConflictReason.LEASED,
                    ConflictReason.MISSING,
                }
            else:
                deleted.append(item.id)
        return deleted

    with ThreadPoolExecutor(2) as pool:
        taken_f, deleted_f = pool.submit(consume), pool.submit(delete)
        taken, deleted = taken_f.result(timeout=120), deleted_f.result(timeout=120)
    assert not set(taken) & set(deleted)
    assert set(taken) | set(deleted) == {item.id for item in stored}
    assert q.list_items(qname) == []
