"""Turning driver errors into querator errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import errors as pg_errors

from querator.errors import InvalidArgument, QueueNotFound, Unavailable


@contextmanager
def driver_errors(queue: str | None = None) -> Iterator[None]:
    """Wrap psycopg errors raised inside the block.

    A missing table means the queue was deleted concurrently: QueueNotFound
    when the block acts on ``queue``. Everything else from the driver is
    Unavailable. Querator errors raised inside pass through unchanged.
    """
    try:
        yield
    except pg_errors.UndefinedTable as exc:
        if queue is None:
            raise Unavailable(f"PostgreSQL: {exc}") from exc
        raise QueueNotFound(queue) from exc
    except psycopg.Error as exc:
        raise Unavailable(f"PostgreSQL: {exc}") from exc


TRANSIENT_REFUSALS = (
    "starting up",
    "shutting down",
    "in recovery mode",
    "not yet accepting connections",
    "too many clients",
    "remaining connection slots",
)
"""What a server says when it refuses a connection for now, not for good."""


async def refuse_bad_dsn(conninfo: str, timeout: float) -> None:
    """Connect once: InvalidArgument when the server refuses the connection string
    for good (``FATAL: database "x" does not exist``, a role, a password),
    Unavailable when it cannot be reached or refuses for now."""
    try:
        conn = await psycopg.AsyncConnection.connect(conninfo, connect_timeout=max(1, int(timeout)))
    except psycopg.Error as exc:
        text = str(exc)
        fatal = text.partition("FATAL:")[2].strip().splitlines()
        if fatal and not any(phrase in fatal[0] for phrase in TRANSIENT_REFUSALS):
            raise InvalidArgument("dsn", f"PostgreSQL refused it: {fatal[0]}") from exc
        raise Unavailable(f"PostgreSQL: {text.splitlines()[0]}") from exc
    await conn.close()
