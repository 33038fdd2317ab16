"""The statement deadline (``?statement_deadline=``): a call blocked on PostgreSQL
fails Unavailable within it, says so once per episode, and leaves no session
behind waiting on the lock."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from pg_schemas import waiting_on_a_lock, with_query
from polling import wait_for

from querator import Item, Leased, Querator
from querator.errors import InvalidArgument, Unavailable
from querator.queue.backends.postgres.dsn import split_dsn

DEADLINE = 1.0
SLACK = 3.0
"""Seconds a failed call may take past the deadline on a busy machine (the
client's cut-off margin included)."""


@contextmanager
def row_locked(pg_dsn: str, pg_schema: str, item: Leased) -> Iterator[None]:
    """Another session holds ``item``'s row lock for the block."""
    table = f"q{item.id.split('.')[0]}_p{item.partition}"
    with psycopg.connect(pg_dsn) as blocker:
        blocker.execute(
            f'SELECT 1 FROM "{pg_schema}".{table} WHERE seq = %s FOR UPDATE',
            (int(item.id.split(".")[-1]),),
        )
        yield
        blocker.rollback()


def timed(call: Callable[[], object], limit: float) -> tuple[BaseException | None, float]:
    """Run ``call`` in a thread; what it raised (None: it returned) and how long it
    took. Fails the test when it is still running after ``limit`` seconds."""
    outcome: list[BaseException | None] = []
    began = time.monotonic()

    def target() -> None:
        try:
            call()
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(limit)
    if thread.is_alive():
        pytest.fail(f"the call was still blocked after {limit}s")
    return outcome[0], time.monotonic() - began


def test_a_commit_blocked_by_a_lock_fails_unavailable_within_the_deadline(
    pg_dsn: str, pg_schema: str, pg_schema_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = with_query(pg_schema_url, statement_deadline=str(DEADLINE))
    caplog.set_level(logging.WARNING, logger="querator.postgres")
    with Querator(url) as q:
        q.create_queue("jobs")
        q.produce("jobs", [Item(payload=b"a"), Item(payload=b"b")])
        first, second = q.lease("jobs", client_id="w", batch_size=2)
        with row_locked(pg_dsn, pg_schema, first):
            for _ in range(2):  # two failures: one episode, one warning
                error, took = timed(lambda: q.complete("jobs", [first]), 30.0)
                assert isinstance(error, Unavailable), error
                assert took < DEADLINE + SLACK
                assert "did not complete within 1s (waiting on a lock)" in str(error)
                assert "PostgreSQL:" not in str(error)
            # The server gave the statement up: nothing of ours still waits on the lock.
            assert not waiting_on_a_lock(pg_dsn, pg_schema)
            q.complete("jobs", [second])  # another row: not blocked
        q.complete("jobs", [first])  # the lock is gone: the same commit goes through
        # A call that completes once none failed for a deadline ends the episode.
        wait_for(
            lambda: q.stats("jobs").total == 0 and "complete again" in caplog.text,
            timeout=DEADLINE + SLACK,
            interval=0.1,
        )
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len([w for w in warnings if "calls fail Unavailable" in w]) == 1, warnings
    assert len([w for w in warnings if "complete again" in w]) == 1, warnings


@pytest.mark.parametrize("bad", ["0", "-1", "x", "3601"])
def test_a_bad_statement_deadline_is_refused(bad: str) -> None:
    with pytest.raises(InvalidArgument, match="statement_deadline"):
        split_dsn(f"postgresql://h/db?statement_deadline={bad}", "querator")


def test_the_statement_deadline_defaults_to_thirty_seconds() -> None:
    assert split_dsn("postgresql://h/db", "querator").statement_deadline == 30.0
    assert split_dsn("postgresql://h/db?statement_deadline=2.5", "s").statement_deadline == 2.5


def _poison_sessions(q: Querator, setting: str) -> int:
    """Give every idle session of ``q``'s pool ``setting`` (as sessions opened
    during a fault keep what they were given); how many were changed. The
    session the client kept from its last call goes back to the pool first."""
    backend: Any = q.aio._backend

    async def poison() -> int:
        pool = backend._pool
        await backend._parts.kept.give_back(pool)
        conns = [await pool.getconn() for _ in range(pool.max_size)]
        for conn in conns:
            await conn.execute(setting)
        for conn in conns:
            await pool.putconn(conn)
        return len(conns)

    return int(q.call(poison))


def test_a_session_left_read_only_is_discarded_with_its_pool(pg_schema_url: str) -> None:
    url = with_query(pg_schema_url, pool_min="2", pool_max="2")
    with Querator(url) as q:
        q.create_queue("jobs")
        q.produce("jobs", [Item(payload=b"a")])
        (item,) = q.lease("jobs", client_id="w")
        assert _poison_sessions(q, "SET default_transaction_read_only = on") == 2
        # On the event loop's path, which uses the pool (the sync client's own
        # complete runs on its thread's session, which is not poisoned).
        with pytest.raises(Unavailable, match="read only sql transaction"):
            q.call(q.aio.complete, "jobs", [item])
        q.call(q.aio.complete, "jobs", [item])  # the next call runs on a fresh session
        assert q.stats("jobs").total == 0
