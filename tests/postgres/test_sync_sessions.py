"""The sync client's hot calls on the calling thread hold a session per thread,
and at most ``MAX_SESSIONS`` threads hold one: a process with many threads does
not open a connection per thread (the others take the loop thread and the pool)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from querator import Item, Querator, QueueSettings
from querator.errors import Conflict, ConflictReason, InvalidArgument, RequestTimeout, Unavailable
from querator.queue.backends.postgres.sync_calls import MAX_SESSIONS, SyncCalls
from querator.queue.ids import parse_id
from querator.telemetry.switches import observing

THREADS = 3 * MAX_SESSIONS


def test_many_threads_share_a_bounded_number_of_sessions(pg_schema_url: str) -> None:
    with Querator(pg_schema_url) as q:
        q.create_queue("jobs")
        q.produce("jobs", [Item(payload=b"warm")])  # the queue's settings are cached
        ready = threading.Barrier(THREADS)
        done: list[bytes] = []
        errors: list[BaseException] = []

        def work(n: int) -> None:
            try:
                ready.wait(timeout=30)
                q.produce("jobs", [Item(payload=str(n).encode())])
                mine = q.lease("jobs", client_id=f"t{n}", batch_size=2)
                q.complete("jobs", mine)
                done.extend(leased.payload for leased in mine)
            except RequestTimeout:
                pass  # the others took them all: left for the last lease below
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        while len(done) < THREADS + 1:
            try:
                rest = q.lease("jobs", client_id="rest", batch_size=THREADS + 1)
            except RequestTimeout:
                break
            q.complete("jobs", rest)
            done.extend(leased.payload for leased in rest)
        assert errors == []
        assert sorted(done) == sorted([b"warm", *(str(n).encode() for n in range(THREADS))])
        calls = q._hot._backend.sync_calls()
        assert isinstance(calls, SyncCalls)
        assert calls.sessions() <= MAX_SESSIONS
        if not observing():  # with call telemetry on, every call takes the loop path
            assert calls.sessions() >= 1


def _session_pid(q: Querator) -> int:
    """The backend pid of the calling thread's hot-call session."""
    calls = q._hot._backend.sync_calls()
    assert isinstance(calls, SyncCalls)
    conn = calls._held.conn
    assert conn is not None and not conn.closed
    return int(conn.info.backend_pid)


def _drain(q: Querator, wanted: set[bytes]) -> set[bytes]:
    """Lease and complete until every payload of ``wanted`` came (30 s at most)."""
    delivered: set[bytes] = set()
    deadline = time.monotonic() + 30
    while not wanted <= delivered and time.monotonic() < deadline:
        try:
            got = q.lease("cut", client_id="drain", batch_size=50, timeout=2)
        except RequestTimeout:
            continue
        q.complete("cut", got)
        delivered |= {leased.payload for leased in got}
    return delivered


@pytest.mark.parametrize("call", ["lease", "complete", "produce", "lease_completing"])
def test_a_session_the_server_terminates_loses_no_item(
    call: str, pg_schema_url: str, pg_dsn: str
) -> None:
    """pg_terminate_backend of the calling thread's session: the next call
    succeeds on a fresh session or raises Unavailable (never a raw driver
    error), the calls after it work, and every item produced is delivered."""
    if observing():
        pytest.skip("with call telemetry on, every call takes the loop path (no session)")
    with Querator(pg_schema_url) as q, psycopg.connect(pg_dsn, autocommit=True) as admin:
        q.create_queue("cut", QueueSettings(lease_timeout=1))
        sent = {f"item-{n}".encode() for n in range(10)}
        q.produce("cut", [Item(payload=p) for p in sorted(sent)])
        held = q.lease("cut", client_id="a", batch_size=3)  # on this thread's session
        delivered: set[bytes] = set()
        admin.execute("SELECT pg_terminate_backend(%s)", (_session_pid(q),))
        try:
            if call in ("lease", "lease_completing"):
                done = held if call == "lease_completing" else []
                delivered |= {leased.payload for leased in done}  # leased once: delivered
                more = q.lease("cut", client_id="a", batch_size=3, complete=done)
                q.complete("cut", more)
                delivered |= {leased.payload for leased in more}
            elif call == "complete":
                q.complete("cut", held)
                delivered |= {leased.payload for leased in held}
            else:
                q.produce("cut", [Item(payload=b"late")])
                sent.add(b"late")
        except Unavailable:
            pass  # its outcome unknown: an item not completed comes back when its lease ends
        delivered |= _drain(q, sent)
        assert sent <= delivered


def test_a_complete_the_session_cannot_take_whole_is_checked_as_ever(pg_schema_url: str) -> None:
    """Leased records whose ids are not spelt as querator spells them, named
    twice, or mixed with (id, version) pairs: the complete the session runs in
    one statement is not taken, and the call reports or does what it always did."""
    with Querator(pg_schema_url) as q:
        q.create_queue("odd")
        q.produce("odd", [Item(payload=str(n).encode()) for n in range(4)])
        first, second, third, fourth = q.lease("odd", client_id="a", batch_size=4)
        address = parse_id(first.id)
        assert address is not None
        misspelt = first.model_copy(
            update={"id": f"{address.queue_id}.{address.partition}.0{address.seq}"}
        )
        with pytest.raises(Conflict) as err:
            q.complete("odd", [second, misspelt])
        assert err.value.reasons == {misspelt.id: ConflictReason.MISSING}
        with pytest.raises(InvalidArgument):
            q.complete("odd", [second, second])
        q.complete("odd", [first, second, (third.id, third.version), fourth])
        assert q.stats("odd").total == 0


def test_a_retry_on_the_session_releases_or_defers_and_is_checked(pg_schema_url: str) -> None:
    """A retry of a batch of one partition (a queue without an attempts limit)
    runs on the calling thread's session: now, the items are leasable again;
    to a later instant (a deferral), they are scheduled; a stale version is
    reported as ever and changes nothing."""
    with Querator(pg_schema_url) as q:
        q.create_queue("again", QueueSettings(max_attempts=0))
        q.produce("again", [Item(payload=str(n).encode()) for n in range(4)])
        first = q.lease("again", client_id="a", batch_size=2)
        q.retry("again", first)
        later = datetime.now(UTC) + timedelta(hours=1)
        second = q.lease("again", client_id="a", batch_size=4)
        assert {leased.payload for leased in second} == {b"0", b"1", b"2", b"3"}
        deferred, kept = second[:2], second[2:]
        q.retry("again", deferred, retry_at=later)
        stats = q.stats("again")
        assert (stats.total, stats.scheduled, stats.leased) == (4, 2, 2)
        with pytest.raises(Conflict) as err:
            q.retry("again", [kept[0], deferred[0]])
        assert err.value.reasons == {deferred[0].id: ConflictReason.STALE}
        assert q.stats("again").leased == 2  # all or nothing: kept[0] is still held
        with pytest.raises(InvalidArgument):
            q.retry("again", kept, retry_at=datetime(2030, 1, 1))  # naive: refused
        q.complete("again", kept)
        assert q.stats("again").total == 2


def test_a_renew_on_the_session_extends_in_order_and_is_checked(pg_schema_url: str) -> None:
    """A renew of a batch of one partition runs on the calling thread's session
    (as the async path's one-statement renew): the items come back in the
    order given with new versions and later deadlines; a stale version is
    reported as ever and changes nothing; a bad extension is refused."""
    with Querator(pg_schema_url) as q:
        q.create_queue("held", QueueSettings(lease_timeout=30))
        q.produce("held", [Item(payload=str(n).encode()) for n in range(3)])
        leased = q.lease("held", client_id="a", batch_size=3)
        given = [leased[2], leased[0], leased[1]]
        renewed = q.renew("held", given, extend=600)
        assert [item.id for item in renewed] == [item.id for item in given]
        for old, new in zip(given, renewed, strict=True):
            assert new.version == old.version + 1
            assert new.lease_deadline > old.lease_deadline + timedelta(seconds=500)
            assert (new.payload, new.client_id, new.attempts) == (old.payload, "a", 1)
        with pytest.raises(Conflict) as err:
            q.renew("held", [renewed[0], given[1]])
        assert err.value.reasons == {given[1].id: ConflictReason.STALE}
        with pytest.raises(InvalidArgument):
            q.renew("held", renewed, extend=-1)
        again = q.renew("held", renewed)  # the queue's lease_timeout
        assert [item.version for item in again] == [item.version + 1 for item in renewed]
        q.complete("held", again)
        assert q.stats("held").total == 0
