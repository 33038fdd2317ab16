"""Transactional enqueue on SQLite: a task deferred with ``connection=`` (a
``sqlite3`` connection to the store's file, or a SQLAlchemy session on it)
exists exactly when the application's transaction commits; what cannot work
is refused with a typed error before anything is written."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import psycopg
import pytest
from polling import wait_for
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from querator import AsyncQuerator, Querator
from querator.errors import InvalidArgument
from querator.tasks import TASK_QUEUE

from .app_tasks import noop
from .task_procs import count, spawn


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """The store's file, holding the application's ``orders`` table too."""
    path = tmp_path / "shop.db"
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE orders (id TEXT PRIMARY KEY)")
    return path


@pytest.fixture
def q(db: Path) -> Iterator[Querator]:
    with Querator(f"sqlite:///{db}") as client:
        noop.defer(client, "warm-up")  # the schema and the task queue exist
        yield client


def _waiting(q: Querator) -> int:
    return sum(p.total for p in q.stats(TASK_QUEUE).partitions)


def test_rolled_back_never_runs_committed_runs_once(q: Querator, db: Path, tmp_path: Path) -> None:
    log = tmp_path / "tasks.log"
    worker = spawn(f"sqlite:///{db}", "w1", log)
    try:
        wait_for(lambda: count(log, "noop", "warm-up") == 1, timeout=60, message="worker up")
        wait_for(lambda: _waiting(q) == 0, timeout=30, message="warm-up completed")
        with closing(sqlite3.connect(db)) as conn:
            with pytest.raises(KeyError), conn:  # rolls back on the exception
                conn.execute("INSERT INTO orders VALUES ('o-1')")
                noop.defer(q, "o-1", connection=conn)
                raise KeyError("the application gives up")
            with conn:  # commits
                conn.execute("INSERT INTO orders VALUES ('o-2')")
                noop.defer(q, "o-2", connection=conn)
                assert _waiting(q) == 0  # not visible before the commit
            assert conn.execute("SELECT id FROM orders").fetchall() == [("o-2",)]
        wait_for(lambda: count(log, "noop", "o-2") == 1, timeout=30, message="o-2 ran")
        noop.defer(q, "after")  # ran after both: o-1 had every chance to run
        wait_for(lambda: count(log, "noop", "after") == 1, timeout=30, message="after ran")
        assert worker.terminate() == 0
    finally:
        worker.kill()
    assert count(log, "noop", "o-1") == 0
    assert count(log, "noop", "o-2") == 1
    assert _waiting(q) == 0


def test_the_commit_wakes_a_waiting_worker(q: Querator, db: Path) -> None:
    from worker_threads import serving

    from querator.workflows import Worker

    from . import app_tasks

    # A lease waits up to 60 s: the task runs within seconds only if the commit wakes it.
    with serving(Worker(q, [noop], poll_timeout=60.0, scheduler=False)):
        wait_for(lambda: ("noop", "warm-up") in app_tasks.RAN, timeout=30)
        with closing(sqlite3.connect(db)) as conn:
            with conn:
                conn.execute("INSERT INTO orders VALUES ('o-5')")
                noop.defer(q, "woken", connection=conn)
            wait_for(lambda: ("noop", "woken") in app_tasks.RAN, timeout=15, message="woken")


def test_a_sqlalchemy_session_commits_or_rolls_back_its_tasks(q: Querator, db: Path) -> None:
    engine = create_engine(f"sqlite:///{db}")
    insert = text("INSERT INTO orders VALUES (:id)")
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


def test_what_cannot_work_is_refused_before_anything_is_written(
    q: Querator, tmp_path: Path, pg_dsn: str
) -> None:
    q.clear(TASK_QUEUE)
    with closing(sqlite3.connect(tmp_path / "other.db")) as other, other:
        with pytest.raises(InvalidArgument, match="not on the store's file") as refused:
            noop.defer(q, "elsewhere", connection=other)
        assert refused.value.field == "connection"
    with closing(sqlite3.connect(tmp_path / "shop.db", isolation_level=None)) as auto:
        with pytest.raises(InvalidArgument, match="autocommit") as refused:
            noop.defer(q, "at once", connection=auto)
        assert refused.value.field == "connection"
    with psycopg.connect(pg_dsn) as conn, pytest.raises(InvalidArgument, match="store is SQLite"):
        noop.defer(q, "wrong kind", connection=conn)
    assert _waiting(q) == 0


def test_a_sqlite_connection_is_refused_by_a_postgresql_store(pg_schema_url: str) -> None:
    with Querator(pg_schema_url) as q, closing(sqlite3.connect(":memory:")) as conn:
        noop.defer(q, "warm-up")
        with pytest.raises(InvalidArgument, match="store is not SQLite") as refused:
            noop.defer(q, "x", connection=conn)
        assert refused.value.field == "connection"
        assert _waiting(q) == 1


@pytest.mark.anyio
async def test_adefer_on_a_sqlite_connection(db: Path) -> None:
    async with AsyncQuerator(f"sqlite:///{db}") as aq:
        await noop.defer_async(aq, "warm-up")
        await aq.clear(TASK_QUEUE)
        with closing(sqlite3.connect(db)) as conn:
            with conn:
                kept = await noop.defer_async(aq, "kept", connection=conn)
            with pytest.raises(KeyError), conn:
                await noop.defer_async(aq, "dropped", connection=conn)
                raise KeyError("rolled back")
        items = await aq.list_items(TASK_QUEUE)
        assert [item.id for item in items] == [kept.id]
