"""Produce inside the application's own transaction (PostgreSQL, SQLite).

```python
import psycopg
from querator import Item, Querator
from querator.queue.foreign import produce_on

with Querator(url) as q, psycopg.connect(dsn) as conn:
    with conn.transaction():
        conn.execute("INSERT INTO orders (id) VALUES (%s)", ["o-1"])
        produce_on(q, conn, "emails", [Item(payload=b"o-1")])
    # the item exists, and workers are woken, exactly when the transaction commits
```

``connection`` is a ``psycopg.Connection`` (for :func:`produce_on`), a
``psycopg.AsyncConnection`` (for :func:`produce_on_async`), or a SQLAlchemy
``Session`` or ``Connection`` on the psycopg driver (sync only). It must reach
the database of querator's store; the items are validated and routed as
:meth:`~querator.queue.service.AsyncQueueClient.produce` does before anything is
written.

On a SQLite store, ``connection`` is a ``sqlite3.Connection`` to the store's
own file (or a SQLAlchemy ``Session``/``Connection`` on it, pysqlite driver),
used from the thread that owns it, by either function: the items join its
open transaction (one that Python's ``sqlite3`` opens implicitly at the first
write counts; a connection in autocommit mode with none open is refused). A
connection to another file is refused. Waiting workers are woken once the
application's transaction ends (:mod:`querator.queue.backends.sqlite.commit_wake`).

In-memory stores refuse (InvalidArgument, field ``connection``), as does a
connection of the other kind than the store.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.rows import tuple_row

from querator.errors import InvalidArgument, Unavailable
from querator.queue.backends.base import ProduceSteps
from querator.queue.backends.sqlite.commit_wake import wake_after_commit
from querator.queue.backends.sqlite.foreign import DATABASE_LIST
from querator.queue.client import QueueClient
from querator.queue.models import Item
from querator.queue.service import AsyncQueueClient

__all__ = ["produce_on", "produce_on_async", "sqlite_connection", "sync_connection"]


def sqlite_connection(connection: object) -> sqlite3.Connection | None:
    """The ``sqlite3`` connection behind ``connection`` (itself, or a SQLAlchemy
    ``Session``/``Connection``'s on pysqlite); None when it is no such thing."""
    if isinstance(connection, sqlite3.Connection):
        return connection
    driver = _sqlalchemy_driver(connection)
    return driver if isinstance(driver, sqlite3.Connection) else None


def _sqlalchemy_driver(connection: object) -> object | None:
    """The driver's connection under a SQLAlchemy ``Session``/``Connection``;
    None for anything else (or without SQLAlchemy)."""
    try:
        from sqlalchemy import Connection as SAConnection
        from sqlalchemy.orm import Session
    except ImportError:  # pragma: no cover - SQLAlchemy is optional
        return None
    if isinstance(connection, Session):
        connection = connection.connection()
    if isinstance(connection, SAConnection):
        return connection.connection.driver_connection
    return None


def _run_sqlite(conn: sqlite3.Connection, steps: ProduceSteps, queue: str) -> list[str]:
    """Run SQLite produce steps on the application's connection, inside its
    transaction; the listeners of ``queue`` are woken once it ends."""
    autocommit = getattr(conn, "autocommit", None) is True or conn.isolation_level is None
    if autocommit and not conn.in_transaction:
        raise InvalidArgument(
            "connection",
            "is in autocommit mode with no transaction open: BEGIN one first, or the"
            " items would be committed at once",
        )
    try:
        statement, params = next(steps)
        if not isinstance(statement, str):
            raise InvalidArgument("connection", "is a sqlite3 connection; the store is not SQLite")
        while True:
            rows = conn.execute(statement, params).fetchall()
            statement, params = steps.send(rows)
    except StopIteration as done:
        ids: list[str] = done.value
    except sqlite3.Error as exc:
        raise Unavailable(f"produce on the application's connection failed: {exc}") from exc
    files = conn.execute(DATABASE_LIST).fetchall()
    wake_after_commit(conn, next(str(row[2]) for row in files if row[1] == "main"), queue)
    return ids


def sync_connection(connection: object) -> psycopg.Connection[Any]:
    """The psycopg connection behind ``connection`` (itself, or a SQLAlchemy
    ``Session``/``Connection``'s); InvalidArgument for anything else."""
    if isinstance(connection, psycopg.Connection):
        return connection
    if isinstance(connection, psycopg.AsyncConnection):
        raise InvalidArgument("connection", "an AsyncConnection needs the async call (defer_async)")
    driver = _sqlalchemy_driver(connection)
    if isinstance(driver, psycopg.Connection):
        return driver
    if driver is not None:
        raise InvalidArgument(
            "connection", f"a SQLAlchemy connection on {type(driver).__name__}, not psycopg 3"
        )
    raise InvalidArgument(
        "connection",
        "must be a psycopg Connection or a SQLAlchemy Session/Connection,"
        f" not {type(connection).__name__}",
    )


def _not_sqlite(statement: object) -> None:
    if isinstance(statement, str):  # the SQLite store's steps
        raise InvalidArgument(
            "connection", "the store is SQLite: give a sqlite3 connection to its file"
        )


def _run_sync(conn: psycopg.Connection[Any], steps: ProduceSteps) -> list[str]:
    try:
        statement, params = next(steps)
        _not_sqlite(statement)
        with conn.cursor(row_factory=tuple_row) as cur:
            while True:
                cur.execute(statement, params)
                rows = cur.fetchall() if cur.description is not None else []
                statement, params = steps.send(rows)
    except StopIteration as done:
        ids: list[str] = done.value
        return ids
    except psycopg.Error as exc:
        raise Unavailable(f"produce on the application's connection failed: {exc}") from exc


async def _run_async(conn: psycopg.AsyncConnection[Any], steps: ProduceSteps) -> list[str]:
    try:
        statement, params = next(steps)
        _not_sqlite(statement)
        async with conn.cursor(row_factory=tuple_row) as cur:
            while True:
                await cur.execute(statement, params)
                rows = await cur.fetchall() if cur.description is not None else []
                statement, params = steps.send(rows)
    except StopIteration as done:
        ids: list[str] = done.value
        return ids
    except psycopg.Error as exc:
        raise Unavailable(f"produce on the application's connection failed: {exc}") from exc


def produce_on(q: QueueClient, connection: object, queue: str, items: Sequence[Item]) -> list[str]:
    """Produce ``items`` into ``queue`` with the application's own ``connection``,
    in its open transaction; returns their ids (see the module doc)."""
    steps = q.call(q.aio.produce_steps, queue, items)  # the store's refusal first
    lite = sqlite_connection(connection)
    if lite is not None:
        return _run_sqlite(lite, steps, queue)
    return _run_sync(sync_connection(connection), steps)


async def produce_on_async(
    aq: AsyncQueueClient, connection: object, queue: str, items: Sequence[Item]
) -> list[str]:
    """:func:`produce_on` for async code, on a ``psycopg.AsyncConnection`` (or
    a SQLite connection, run at once in the caller's thread: SQLite is local)."""
    steps = await aq.produce_steps(queue, items)  # the store's refusal first
    lite = sqlite_connection(connection)
    if lite is not None:
        return _run_sqlite(lite, steps, queue)
    if not isinstance(connection, psycopg.AsyncConnection):
        raise InvalidArgument(
            "connection", f"must be a psycopg AsyncConnection, not {type(connection).__name__}"
        )
    return await _run_async(connection, steps)
