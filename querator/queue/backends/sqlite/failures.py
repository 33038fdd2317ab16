"""Turning sqlite3 errors into querator errors: retryable, the request's fault,
or the operator's (as :mod:`querator.queue.backends.postgres.failures` does for
PostgreSQL).

SQLite's primary result code decides:

- **retryable** (:class:`~querator.errors.Unavailable`): another connection
  held the lock past the busy timeout (``SQLITE_BUSY``, ``SQLITE_LOCKED``), an
  interrupted call, no memory for now;
- **the request's fault** (:class:`~querator.errors.InvalidArgument`): a value
  too big (``SQLITE_TOOBIG``), a constraint broken, a type mismatch, a
  parameter out of range;
- **the operator's** (:class:`~querator.errors.StoreFault`): everything else:
  a full disk (``SQLITE_FULL``), a file that cannot be opened or written
  (``SQLITE_CANTOPEN``, ``SQLITE_READONLY``, ``SQLITE_PERM``), an I/O error,
  a corrupt file or one that is not a database.

Each becomes one line of querator's own words with SQLite's code name.
"""

from __future__ import annotations

import sqlite3

from querator.errors import InvalidArgument, QueratorError, QueueNotFound, StoreFault, Unavailable

RETRYABLE = {5: "SQLITE_BUSY", 6: "SQLITE_LOCKED", 7: "SQLITE_NOMEM", 9: "SQLITE_INTERRUPT"}
"""Primary result codes that pass."""
REQUEST = {18: "SQLITE_TOOBIG", 19: "SQLITE_CONSTRAINT", 20: "SQLITE_MISMATCH", 25: "SQLITE_RANGE"}
"""Primary result codes that are the request's fault."""
OPERATOR = {
    3: "SQLITE_PERM",
    8: "SQLITE_READONLY",
    10: "SQLITE_IOERR",
    11: "SQLITE_CORRUPT",
    13: "SQLITE_FULL",
    14: "SQLITE_CANTOPEN",
    26: "SQLITE_NOTADB",
}
"""Primary result codes named in the operator's errors (any other code is the operator's too)."""


def is_missing_table(exc: sqlite3.Error) -> bool:
    """True when ``exc`` reports a table that does not exist (a dropped queue's partition)."""
    return "no such table" in str(exc)


def classify(exc: sqlite3.Error, queue: str | None = None) -> QueratorError:
    """The querator error that stands for ``exc`` (see the module docstring); a
    missing table under ``queue`` is QueueNotFound."""
    if queue is not None and is_missing_table(exc):
        return QueueNotFound(queue)
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(code, int):
        text = str(exc)
        busy = "database is locked" in text or "database is busy" in text
        return (
            Unavailable("SQLite store unavailable: the database is locked")
            if busy
            else (StoreFault(f"SQLite: {type(exc).__name__}"))
        )
    primary = code & 0xFF
    if primary in RETRYABLE:
        return Unavailable(f"SQLite store unavailable: {RETRYABLE[primary]}")
    if primary in REQUEST:
        return InvalidArgument("request", f"the store cannot hold a value: {REQUEST[primary]}")
    name = OPERATOR.get(primary, getattr(exc, "sqlite_errorname", None) or f"code {code}")
    return StoreFault(f"SQLite: {name}", name)
