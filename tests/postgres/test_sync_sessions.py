"""The sync client's hot calls on the calling thread hold a session per thread,
and at most ``MAX_SESSIONS`` threads hold one: a process with many threads does
not open a connection per thread (the others take the loop thread and the pool)."""

from __future__ import annotations

import threading

from querator import Item, Querator
from querator.errors import RequestTimeout
from querator.queue.backends.postgres.sync_calls import MAX_SESSIONS, SyncCalls
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
