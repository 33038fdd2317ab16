"""Dead-lettering: exhausted attempts, expiry, retry(dead=True), dead-queue rules."""

from __future__ import annotations

import pytest
from polling import wait_for, wait_until

from querator import Item, Querator, QueueSettings, StoredItem
from querator.errors import Conflict, ConflictReason, InvalidArgument, QueueNotFound, RequestTimeout

from .helpers import items, lease_one, make_queue


def dead_items_after_maintenance(q: Querator, dead: str, count: int) -> list[StoredItem]:
    """Run maintenance until ``dead`` holds ``count`` items; return them.

    Maintenance may also run in the client's background: whoever moves the
    items, they must arrive.
    """

    def arrived() -> list[StoredItem] | None:
        moved = q.run_maintenance()
        assert isinstance(moved, int)
        assert moved >= 0
        found = q.list_items(dead)
        return found if len(found) >= count else None

    return wait_for(arrived, message=f"{count} item(s) to be dead-lettered into {dead}")


def test_retry_after_last_attempt_dead_letters_at_once(q: Querator, qname: str) -> None:
    dead = make_queue(q, f"{qname}-dead")
    src = make_queue(q, qname, max_attempts=2, dead_queue=dead, lease_timeout=30)
    item = Item(payload=b"p", kind="k", encoding="e", reference="r", headers={"h": "v"})
    (item_id,) = q.produce(src, [item])

    q.retry(src, [lease_one(q, src)])
    assert q.stats(dead).total == 0
    last = lease_one(q, src)
    assert last.attempts == 2
    q.retry(src, [last])

    assert q.stats(src).total == 0
    (moved,) = q.list_items(dead)
    assert moved.source_id == item_id
    assert moved.id != item_id
    assert moved.queue == dead
    assert (moved.payload, moved.kind, moved.encoding, moved.reference) == (b"p", "k", "e", "r")
    assert moved.headers == {  # its own, and querator's marks (test_dead_marks.py)
        "h": "v",
        "querator-dead-attempts": "2",
        "querator-dead-reason": "used all 2 attempts (max_attempts)",
        "querator-dead-source": src,
    }
    assert moved.attempts == 0
    assert q.stats(dead).dead_lettered == 1
    with pytest.raises(Conflict) as err:
        q.complete(src, [last])
    assert err.value.reasons == {item_id: ConflictReason.MISSING}

    got = lease_one(q, dead)
    assert got.id == moved.id
    assert got.source_id == item_id


def test_exhausted_item_whose_lease_expires_is_dead_lettered(q: Querator, qname: str) -> None:
    dead = make_queue(q, f"{qname}-dead")
    src = make_queue(q, qname, max_attempts=1, dead_queue=dead, lease_timeout=0.3)
    (item_id,) = q.produce(src, items(b"poison"))
    leased = lease_one(q, src)
    wait_until(leased.lease_deadline.timestamp() + 0.02)

    with pytest.raises(RequestTimeout):
        q.lease(src, client_id="c2")  # no attempts left: never leased again
    (moved,) = dead_items_after_maintenance(q, dead, 1)
    assert moved.source_id == item_id
    assert moved.payload == b"poison"
    assert q.stats(src).total == 0


def test_exhausted_item_without_dead_queue_is_deleted(q: Querator, qname: str) -> None:
    src = make_queue(q, qname, max_attempts=1, lease_timeout=30)
    q.produce(src, items(b"a"))
    leased = lease_one(q, src)
    q.retry(src, [leased])
    assert q.stats(src).total == 0
    with pytest.raises(Conflict) as err:
        q.complete(src, [leased])
    assert err.value.reasons == {leased.id: ConflictReason.MISSING}


def test_expired_lease_without_dead_queue_is_deleted_by_maintenance(
    q: Querator, qname: str
) -> None:
    src = make_queue(q, qname, max_attempts=1, lease_timeout=0.3)
    q.produce(src, items(b"a"))
    leased = lease_one(q, src)
    wait_until(leased.lease_deadline.timestamp() + 0.02)

    def gone() -> bool:
        q.run_maintenance()
        return q.stats(src).total == 0

    wait_for(gone, message="exhausted item to be deleted")


def test_retry_dead_moves_the_item_now(q: Querator, qname: str) -> None:
    dead = make_queue(q, f"{qname}-dead")
    src = make_queue(q, qname, dead_queue=dead)
    a, b = q.produce(src, items(b"a", b"b"))
    first, second = q.lease(src, client_id="c1", batch_size=2)
    q.retry(src, [first], dead=True)

    assert [s.source_id for s in q.list_items(dead)] == [a]
    assert [s.id for s in q.list_items(src)] == [b]
    q.complete(src, [second])


def test_expired_items_are_not_leasable_and_get_dead_lettered(q: Querator, qname: str) -> None:
    dead = make_queue(q, f"{qname}-dead")
    src = make_queue(q, qname, dead_queue=dead, lease_timeout=0.2, expire_timeout=0.4)
    (item_id,) = q.produce(src, items(b"stale news"))
    (stored,) = q.list_items(src)
    wait_until(stored.expire_at.timestamp() + 0.02)

    with pytest.raises(RequestTimeout):
        q.lease(src, client_id="c1")
    (moved,) = dead_items_after_maintenance(q, dead, 1)
    assert moved.source_id == item_id
    assert moved.payload == b"stale news"
    assert moved.expire_at > stored.expire_at  # a fresh expiry in the dead queue


def test_dead_queue_must_exist(q: Querator, qname: str) -> None:
    with pytest.raises((InvalidArgument, QueueNotFound)):
        q.create_queue(qname, QueueSettings(dead_queue=f"{qname}-nowhere"))
    with pytest.raises(QueueNotFound):
        q.get_queue(qname)


def test_dead_queue_cannot_be_the_queue_itself(q: Querator, qname: str) -> None:
    with pytest.raises(InvalidArgument):
        q.create_queue(qname, QueueSettings(dead_queue=qname))
    make_queue(q, qname)
    with pytest.raises(InvalidArgument):
        q.update_queue(qname, QueueSettings(dead_queue=qname))


def test_dead_queue_cannot_have_a_dead_queue_of_its_own(q: Querator, qname: str) -> None:
    last = make_queue(q, f"{qname}-c")
    middle = make_queue(q, f"{qname}-b", dead_queue=last)
    with pytest.raises(InvalidArgument):
        q.create_queue(f"{qname}-a", QueueSettings(dead_queue=middle))
    other = make_queue(q, f"{qname}-d")
    with pytest.raises(InvalidArgument):
        q.update_queue(other, QueueSettings(dead_queue=middle))


def test_a_dead_queue_in_use_cannot_be_deleted(q: Querator, qname: str) -> None:
    dead = make_queue(q, f"{qname}-dead")
    src = make_queue(q, qname, dead_queue=dead)
    with pytest.raises(InvalidArgument):
        q.delete_queue(dead)
    assert q.get_queue(dead).name == dead

    q.delete_queue(src)
    q.delete_queue(dead)
    with pytest.raises(QueueNotFound):
        q.get_queue(dead)


def test_run_maintenance_returns_a_count(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    q.produce(qname, items(b"healthy"))
    moved = q.run_maintenance()
    assert isinstance(moved, int)
    assert moved == 0
    assert q.stats(qname).total == 1
