"""complete, retry and renew: version checks, lease checks, ordering after retry/expiry."""

from __future__ import annotations

import time

import pytest
from polling import wait_until

from querator import Leased, Querator
from querator.errors import Conflict, ConflictReason, RequestTimeout

from .helpers import drain, ids_of, items, later, lease_one, make_queue, utcnow


def expire(leased: Leased) -> None:
    """Wait until the lease of ``leased`` has ended."""
    wait_until(leased.lease_deadline.timestamp() + 0.02)


def test_complete_removes_items(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    a, b, c = q.produce(qname, items(b"a", b"b", b"c"))
    batch = q.lease(qname, client_id="c1", batch_size=2)
    q.complete(qname, batch)

    assert ids_of(q.list_items(qname)) == [c]
    assert q.stats(qname).total == 1
    assert ids_of(batch) == [a, b]


def test_complete_accepts_id_version_pairs(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    q.produce(qname, items(b"a"))
    leased = lease_one(q, qname)
    q.complete(qname, [(leased.id, leased.version)])
    assert q.stats(qname).total == 0


def test_complete_twice_reports_missing(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    q.produce(qname, items(b"a"))
    leased = lease_one(q, qname)
    q.complete(qname, [leased])
    with pytest.raises(Conflict) as err:
        q.complete(qname, [leased])
    assert err.value.reasons == {leased.id: ConflictReason.MISSING}


def test_complete_of_unleased_item_reports_not_leased(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    q.produce(qname, items(b"a"))
    (stored,) = q.list_items(qname)
    with pytest.raises(Conflict) as err:
        q.complete(qname, [(stored.id, stored.version)])
    assert err.value.reasons == {stored.id: ConflictReason.NOT_LEASED}
    assert q.stats(qname).total == 1


def test_complete_after_own_lease_expired_reports_not_leased(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=0.3)
    q.produce(qname, items(b"a"))
    leased = lease_one(q, qname)
    expire(leased)
    with pytest.raises(Conflict) as err:
        q.complete(qname, [leased])
    assert err.value.reasons == {leased.id: ConflictReason.NOT_LEASED}
    assert q.stats(qname).total == 1


def test_stale_holder_cannot_complete_retry_or_renew(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=0.3)
    q.produce(qname, items(b"a"))
    old = lease_one(q, qname, client_id="slow")
    new = lease_one(q, qname, client_id="fast", timeout=5)  # after old's lease expired
    assert new.id == old.id
    assert new.version > old.version
    assert new.attempts == 2

    for call in (
        lambda: q.complete(qname, [old]),
        lambda: q.retry(qname, [old]),
        lambda: q.renew(qname, [old]),
    ):
        with pytest.raises(Conflict) as err:
            call()
        assert err.value.reasons == {old.id: ConflictReason.STALE}

    q.complete(qname, [new])
    assert q.stats(qname).total == 0


def test_complete_is_all_or_nothing(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=30)
    q.produce(qname, items(b"a", b"b"))
    a, b = q.lease(qname, client_id="c1", batch_size=2)
    q.complete(qname, [b])

    with pytest.raises(Conflict) as err:
        q.complete(qname, [a, b])
    assert err.value.reasons == {b.id: ConflictReason.MISSING}
    assert ids_of(q.list_items(qname)) == [a.id]
    q.complete(qname, [a])  # still held under its version: nothing was changed
    assert q.stats(qname).total == 0


def test_conflict_names_every_failed_item(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=30)
    q.produce(qname, items(b"a", b"b", b"c"))
    leased = q.lease(qname, client_id="c1", batch_size=2)
    (unleased,) = [s for s in q.list_items(qname) if s.attempts == 0]
    q.complete(qname, [leased[0]])

    with pytest.raises(Conflict) as err:
        q.complete(
            qname,
            [leased[0], (leased[1].id, leased[1].version + 1), (unleased.id, unleased.version)],
        )
    assert err.value.reasons == {
        leased[0].id: ConflictReason.MISSING,
        leased[1].id: ConflictReason.STALE,
        unleased.id: ConflictReason.NOT_LEASED,
    }
    assert q.stats(qname).leased == 1


def test_retry_sends_item_to_the_tail_and_releases_it(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=30)
    a, b, c = q.produce(qname, items(b"a", b"b", b"c"))
    first = lease_one(q, qname)
    assert first.id == a
    q.retry(qname, [first])

    (stored,) = [s for s in q.list_items(qname) if s.id == a]
    assert stored.version > first.version
    assert stored.lease_deadline is None
    assert stored.attempts == 1
    assert q.stats(qname).leased == 0
    assert ids_of(drain(q, qname)) == [b, c, a]


def test_retry_at_delays_the_item(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=30)
    q.produce(qname, items(b"a"))
    leased = lease_one(q, qname)
    retry_at = later(0.5)
    q.retry(qname, [leased], retry_at=retry_at)

    with pytest.raises(RequestTimeout):
        q.lease(qname, client_id="c1")
    assert q.stats(qname).scheduled == 1
    again = lease_one(q, qname, timeout=5)
    assert again.id == leased.id
    assert utcnow() >= retry_at
    assert again.attempts == 2


def test_expired_lease_goes_to_the_tail(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=0.3)
    (a,) = q.produce(qname, items(b"a"))
    leased = lease_one(q, qname, client_id="crashed")
    (b,) = q.produce(qname, items(b"b"))
    expire(leased)

    got = q.lease(qname, client_id="c2", batch_size=10)
    assert ids_of(got) == [b, a]
    assert got[1].attempts == 2


def test_renew_extends_the_lease_and_bumps_the_version(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=30)
    q.produce(qname, items(b"a", b"b"))
    batch = q.lease(qname, client_id="c1", batch_size=2)
    renewed = q.renew(qname, batch, extend=120)

    assert ids_of(renewed) == ids_of(batch)
    for old, new in zip(batch, renewed, strict=True):
        assert new.version > old.version
        assert 115 < (new.lease_deadline - utcnow()).total_seconds() <= 121
        assert new.client_id == "c1"
        assert new.payload == old.payload
    with pytest.raises(Conflict) as err:
        q.complete(qname, batch)
    assert err.value.reasons == {i.id: ConflictReason.STALE for i in batch}
    q.complete(qname, renewed)
    assert q.stats(qname).total == 0


def test_renew_defaults_to_the_queue_lease_timeout(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=40)
    q.produce(qname, items(b"a"))
    (renewed,) = q.renew(qname, [lease_one(q, qname)])
    assert 35 < (renewed.lease_deadline - utcnow()).total_seconds() <= 41


def test_renewed_item_stays_held_past_its_first_deadline(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=0.3)
    q.produce(qname, items(b"a"))
    leased = lease_one(q, qname, client_id="c1")
    (renewed,) = q.renew(qname, [leased], extend=30)

    started = time.monotonic()
    with pytest.raises(RequestTimeout):
        q.lease(qname, client_id="c2", timeout=0.8)
    assert time.monotonic() - started >= 0.7
    q.complete(qname, [renewed])
