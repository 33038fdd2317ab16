"""Turning driver errors into querator errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import errors as pg_errors

from querator.errors import QueueNotFound, Unavailable


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
