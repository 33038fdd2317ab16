"""Produce inside the application's own transaction (PostgreSQL).

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
written. SQLite and in-memory stores refuse (InvalidArgument, field
``connection``): they have no connection an application could share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.rows import tuple_row

from querator.errors import InvalidArgument, Unavailable
from querator.queue.backends.base import ProduceSteps
from querator.queue.client import QueueClient
from querator.queue.models import Item
from querator.queue.service import AsyncQueueClient

__all__ = ["produce_on", "produce_on_async", "sync_connection"]


def sync_connection(connection: object) -> psycopg.Connection[Any]:
    """The psycopg connection behind ``connection`` (itself, or a SQLAlchemy
    ``Session``/``Connection``'s); InvalidArgument for anything else."""
    if isinstance(connection, psycopg.Connection):
        return connection
    if isinstance(connection, psycopg.AsyncConnection):
        raise InvalidArgument("connection", "an AsyncConnection needs the async call (defer_async)")
    from sqlalchemy import Connection as SAConnection
    from sqlalchemy.orm import Session

    if isinstance(connection, Session):
        connection = connection.connection()
    if isinstance(connection, SAConnection):
        driver = connection.connection.driver_connection
        if isinstance(driver, psycopg.Connection):
            return driver
        raise InvalidArgument(
            "connection", f"a SQLAlchemy connection on {type(driver).__name__}, not psycopg 3"
        )
    raise InvalidArgument(
        "connection",
        "must be a psycopg Connection or a SQLAlchemy Session/Connection,"
        f" not {type(connection).__name__}",
    )


def _run_sync(conn: psycopg.Connection[Any], steps: ProduceSteps) -> list[str]:
    try:
        statement, params = next(steps)
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
    return _run_sync(sync_connection(connection), steps)


async def produce_on_async(
    aq: AsyncQueueClient, connection: object, queue: str, items: Sequence[Item]
) -> list[str]:
    """:func:`produce_on` for async code, on a ``psycopg.AsyncConnection``."""
    steps = await aq.produce_steps(queue, items)  # the store's refusal first
    if not isinstance(connection, psycopg.AsyncConnection):
        raise InvalidArgument(
            "connection", f"must be a psycopg AsyncConnection, not {type(connection).__name__}"
        )
    return await _run_async(connection, steps)
