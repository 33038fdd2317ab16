"""Transactional enqueue on PostgreSQL: a task deferred with ``connection=``
exists exactly when the application's transaction commits."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from polling import wait_for
from psycopg import sql
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from querator import AsyncQuerator, Querator
from querator.tasks import TASK_QUEUE

from .app_tasks import noop
from .task_procs import count, spawn


@pytest.fixture
def q(pg_schema_url: str) -> Iterator[Querator]:
    with Querator(pg_schema_url) as client:
        noop.defer(client, "warm-up")  # the schema and the task queue exist
        yield client


@pytest.fixture
def orders(q: Querator, pg_dsn: str, pg_schema: str) -> sql.Composed:
    """The application's own table, in the test's schema."""
    table = sql.SQL("{}.orders").format(sql.Identifier(pg_schema))
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (id text PRIMARY KEY)").format(table))
    return table


def _waiting(q: Querator) -> int:
    return sum(p.total for p in q.stats(TASK_QUEUE).partitions)


def test_rolled_back_never_runs_committed_runs_once(
    q: Querator, pg_dsn: str, pg_schema_url: str, orders: sql.Composed, tmp_path: Path
) -> None:
    log = tmp_path / "tasks.log"
    worker = spawn(pg_schema_url, "w1", log)
    try:
        wait_for(lambda: count(log, "noop", "warm-up") == 1, timeout=60, message="worker up")
        with psycopg.connect(pg_dsn) as conn:
            with pytest.raises(KeyError), conn.transaction():
                conn.execute(sql.SQL("INSERT INTO {} VALUES ('o-1')").format(orders))
                noop.defer(q, "o-1", connection=conn)
                raise KeyError("the application gives up")
            with conn.transaction():
                conn.execute(sql.SQL("INSERT INTO {} VALUES ('o-2')").format(orders))
                noop.defer(q, "o-2", connection=conn)
                assert _waiting(q) == 0  # not visible before the commit
        wait_for(lambda: count(log, "noop", "o-2") == 1, timeout=30, message="o-2 ran")
        assert worker.terminate() == 0
    finally:
        worker.kill()
    assert count(log, "noop", "o-1") == 0
    assert count(log, "noop", "o-2") == 1
    assert _waiting(q) == 0


def test_the_commit_wakes_a_waiting_worker(
    q: Querator, pg_dsn: str, tmp_path: Path, orders: sql.Composed
) -> None:
    from worker_threads import serving

    from querator.workflows import Worker

    from . import app_tasks

    # A lease waits up to 60 s: the task runs within seconds only if the commit wakes it.
    with serving(Worker(q, [noop], poll_timeout=60.0, scheduler=False)):
        wait_for(lambda: ("noop", "warm-up") in app_tasks.RAN, timeout=30)
        with psycopg.connect(pg_dsn) as conn, conn.transaction():
            noop.defer(q, "woken", connection=conn)
        wait_for(lambda: ("noop", "woken") in app_tasks.RAN, timeout=15, message="woken")


def test_a_sqlalchemy_session_commits_or_rolls_back_its_tasks(
    q: Querator, pg_dsn: str, orders: sql.Composed
) -> None:
    engine = create_engine(pg_dsn.replace("postgresql://", "postgresql+psycopg://", 1))
    insert = text(sql.SQL("INSERT INTO {} VALUES (:id)").format(orders).as_string(None))
    try:
        q.clear(TASK_QUEUE)
        with Session(engine) as session:
            session.execute(insert, {"id": "o-3"})
            noop.defer_many(q, [(("a",), {}), (("b",), {})], connection=session)
            session.rollback()
        assert _waiting(q) == 0
        with Session(engine) as session:
            session.execute(insert, {"id": "o-4"})
            handle = noop.defer(q, "o-4", connection=session)
            session.commit()
        assert [item.id for item in q.list_items(TASK_QUEUE)] == [handle.id]
    finally:
        engine.dispose()


@pytest.mark.anyio
async def test_adefer_on_an_async_connection(pg_schema_url: str, pg_dsn: str) -> None:
    async with AsyncQuerator(pg_schema_url) as aq:
        async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
            async with conn.transaction():
                kept = await noop.defer_async(aq, "kept", connection=conn)
            with pytest.raises(KeyError):
                async with conn.transaction():
                    await noop.defer_async(aq, "dropped", connection=conn)
                    raise KeyError("rolled back")
        items = await aq.list_items(TASK_QUEUE)
        assert [item.id for item in items] == [kept.id]
