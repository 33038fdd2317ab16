"""Queue lifecycle: create, get, update, delete, list, stats, clear, delete_items."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from polling import wait_for

from querator import Item, Querator, QueueInfo, QueueSettings
from querator.errors import (
    Conflict,
    ConflictReason,
    InvalidArgument,
    QueueExists,
    QueueNotEmpty,
    QueueNotFound,
    RequestTimeout,
)

from .helpers import (
    drain,
    ids_of,
    items,
    later,
    lease_one,
    make_queue,
    payloads_of,
    same_instant,
    utcnow,
)


def test_create_queue_returns_info_that_get_queue_repeats(q: Querator, qname: str) -> None:
    settings = QueueSettings(lease_timeout=12.5, expire_timeout=3600, max_attempts=7, reference="x")
    before = utcnow()
    info = q.create_queue(qname, settings)

    assert isinstance(info, QueueInfo)
    assert info.name == qname
    assert info.settings == settings
    assert info.created_at.tzinfo is not None
    assert abs((info.created_at - before).total_seconds()) < 5
    assert q.get_queue(qname) == info


def test_create_queue_without_settings_uses_defaults(q: Querator, qname: str) -> None:
    info = q.create_queue(qname)
    assert info.settings == QueueSettings()


def test_queue_ids_differ(q: Querator, qname: str) -> None:
    a = q.create_queue(f"{qname}-a")
    b = q.create_queue(f"{qname}-b")
    assert a.queue_id != b.queue_id


def test_create_existing_queue_raises_queue_exists(q: Querator, qname: str) -> None:
    q.create_queue(qname, QueueSettings(lease_timeout=5))
    with pytest.raises(QueueExists):
        q.create_queue(qname, QueueSettings(lease_timeout=9))
    assert q.get_queue(qname).settings.lease_timeout == 5


def test_unknown_queue_raises_queue_not_found_everywhere(q: Querator, qname: str) -> None:
    absent = f"{qname}-absent"
    calls: list[Callable[[], object]] = [
        lambda: q.get_queue(absent),
        lambda: q.delete_queue(absent),
        lambda: q.update_queue(absent, QueueSettings()),
        lambda: q.produce(absent, [Item(payload=b"x")]),
        lambda: q.lease(absent, client_id="c1"),
        lambda: q.stats(absent),
        lambda: q.list_items(absent),
        lambda: q.list_scheduled(absent),
        lambda: q.clear(absent),
    ]
    for call in calls:
        with pytest.raises(QueueNotFound):
            call()


def test_update_queue_changes_settings(q: Querator, qname: str) -> None:
    q.create_queue(qname, QueueSettings(lease_timeout=10))
    new = QueueSettings(lease_timeout=20, max_attempts=3, reference="owner: team-a")
    info = q.update_queue(qname, new)
    assert info.settings == new
    assert q.get_queue(qname).settings == new


def test_update_queue_cannot_shrink_partitions(q: Querator, qname: str) -> None:
    q.create_queue(qname, QueueSettings(partitions=3))
    with pytest.raises(InvalidArgument):
        q.update_queue(qname, QueueSettings(partitions=2))
    assert q.get_queue(qname).settings.partitions == 3


def test_update_queue_applies_to_new_leases_only(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=60)
    q.produce(qname, items(b"first", b"second"))
    first = lease_one(q, qname)
    assert 55 < (first.lease_deadline - utcnow()).total_seconds() <= 61

    q.update_queue(qname, QueueSettings(lease_timeout=0.3))
    second = lease_one(q, qname)
    assert (second.lease_deadline - utcnow()).total_seconds() < 5

    stored = {s.id: s for s in q.list_items(qname)}
    assert same_instant(stored[first.id].lease_deadline, first.lease_deadline)
    # The short lease expires and the item comes back; the long one still holds.
    again = q.lease(qname, client_id="c2", batch_size=10, timeout=5)
    assert ids_of(again) == [second.id]


def test_delete_queue_refuses_a_queue_that_holds_items_unless_forced(
    q: Querator, qname: str
) -> None:
    make_queue(q, qname, partitions=2)
    q.produce(qname, items(b"a", b"b", b"c"))
    with pytest.raises(QueueNotEmpty) as refused:
        q.delete_queue(qname)
    assert (refused.value.queue, refused.value.count) == (qname, 3)
    assert "3 item(s)" in str(refused.value)
    assert q.stats(qname).total == 3  # nothing was deleted
    q.complete(qname, drain(q, qname))
    q.delete_queue(qname)  # empty now: no force needed
    with pytest.raises(QueueNotFound):
        q.get_queue(qname)


def test_delete_queue_drops_it_and_its_items(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    old_ids = q.produce(qname, items(b"a", b"b"))
    q.delete_queue(qname, force=True)

    with pytest.raises(QueueNotFound):
        q.get_queue(qname)
    with pytest.raises(QueueNotFound):
        q.produce(qname, [Item(payload=b"c")])

    make_queue(q, qname)
    assert q.stats(qname).total == 0
    assert q.list_items(qname) == []
    with pytest.raises(Conflict) as err:
        q.complete(qname, [(old_ids[0], 1)])
    assert err.value.reasons == {old_ids[0]: ConflictReason.MISSING}


def test_list_queues_sorted_with_inclusive_pivot(q: Querator, qname: str) -> None:
    names = [f"{qname}-{suffix}" for suffix in ("d", "a", "e", "c", "b")]
    for name in names:
        q.create_queue(name)
    expected = sorted(names)

    assert [i.name for i in q.list_queues()] == expected
    assert [i.name for i in q.list_queues(limit=2)] == expected[:2]
    assert [i.name for i in q.list_queues(pivot=expected[2], limit=2)] == expected[2:4]
    assert [i.name for i in q.list_queues(pivot=f"{qname}-bb")] == expected[2:]
    assert q.list_queues(pivot=f"{qname}-z") == []


def test_list_queues_sorts_by_code_point(q: Querator) -> None:
    names = ["b", "B", "a", "_x", "-y", ".z", "0", "a-b", "a.b", "a_b", "ab", "Z"]
    for name in names:
        q.create_queue(name)
    expected = sorted(names)  # code-point order, the same on every backend
    assert [i.name for i in q.list_queues()] == expected
    assert [i.name for i in q.list_queues(pivot="a")] == expected[expected.index("a") :]


def test_list_queues_pages_through_everything(q: Querator, qname: str) -> None:
    names = sorted(f"{qname}-{i:02d}" for i in range(7))
    for name in names:
        q.create_queue(name)

    seen: list[str] = []
    page = q.list_queues(limit=3)
    while page:
        seen.extend(i.name for i in page)
        if len(page) < 3:
            break
        # The pivot is inclusive: ask for one more and drop the name already seen.
        page = q.list_queues(pivot=page[-1].name, limit=4)[1:]
    assert seen == names


def test_list_items_pages_with_inclusive_pivot(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    ids = q.produce(qname, items(*(bytes([65 + i]) for i in range(5))))

    assert ids_of(q.list_items(qname)) == ids
    assert ids_of(q.list_items(qname, limit=2)) == ids[:2]
    assert ids_of(q.list_items(qname, pivot=ids[1], limit=2)) == ids[1:3]
    assert ids_of(q.list_items(qname, pivot=ids[4], limit=10)) == ids[4:]
    assert payloads_of(q.list_items(qname)) == [b"A", b"B", b"C", b"D", b"E"]


def test_list_items_shows_lease_state(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=30)
    first, second = q.produce(qname, items(b"a", b"b"))
    leased = lease_one(q, qname, client_id="worker-1")

    stored = {s.id: s for s in q.list_items(qname)}
    assert leased.id == first
    assert stored[first].version == leased.version
    assert stored[first].client_id == "worker-1"
    assert stored[first].attempts == 1
    assert same_instant(stored[first].lease_deadline, leased.lease_deadline)
    assert stored[second].attempts == 0
    assert stored[second].lease_deadline is None


def test_stats_counts(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=30)
    empty = q.stats(qname)
    assert (empty.total, empty.leased, empty.scheduled, empty.dead_lettered) == (0, 0, 0, 0)
    assert [p.partition for p in empty.partitions] == [0]
    assert empty.partitions[0].oldest_age is None

    q.produce(qname, items(b"a", b"b", b"c"))
    q.produce(qname, items(b"s1", b"s2", enqueue_at=later(3600)))
    lease_one(q, qname)

    stats = q.stats(qname)
    assert stats.queue == qname
    assert (stats.total, stats.leased, stats.scheduled, stats.dead_lettered) == (5, 1, 2, 0)
    oldest = stats.partitions[0].oldest_age
    assert oldest is not None
    assert 0 <= oldest < 60


def test_stats_leased_drops_when_lease_expires(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=0.3)
    q.produce(qname, items(b"a"))
    lease_one(q, qname)
    assert q.stats(qname).leased == 1
    wait_for(lambda: q.stats(qname).leased == 0, message="expired lease still counted")
    assert q.stats(qname).total == 1


def test_clear_non_destructive_keeps_leased_items(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=30)
    q.produce(qname, items(b"a", b"b", b"c"))
    q.produce(qname, items(b"later", enqueue_at=later(3600)))
    held = lease_one(q, qname)

    assert q.clear(qname) == 3
    remaining = q.list_items(qname)
    assert ids_of(remaining) == [held.id]
    q.complete(qname, [held])

    q.produce(qname, items(b"d"))
    lease_one(q, qname)
    assert q.clear(qname, destructive=True) == 1
    assert q.stats(qname).total == 0


def test_delete_items_is_all_or_nothing(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    a, b, c = q.produce(qname, items(b"a", b"b", b"c"))
    q.delete_items(qname, [a, c])
    assert ids_of(q.list_items(qname)) == [b]

    with pytest.raises(Conflict) as err:
        q.delete_items(qname, [b, a])
    assert err.value.reasons == {a: ConflictReason.MISSING}
    assert ids_of(q.list_items(qname)) == [b]


def test_deleted_items_cannot_be_leased(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    (a,) = q.produce(qname, items(b"a"))
    q.delete_items(qname, [a])
    with pytest.raises(RequestTimeout):
        q.lease(qname, client_id="c1")
    assert drain(q, qname) == []
