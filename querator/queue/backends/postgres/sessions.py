"""Pooled sessions after a session-state error: none opened during the fault is reused.

A PostgreSQL session keeps what it was given when it opened: a database made
read-only for a while (``default_transaction_read_only``), a role's
``statement_timeout`` that was reset since. An error saying so
(:data:`SESSION_ERRORS`) means every session opened during the fault is unfit,
including those the pool opened after the error to replace the first ones. So
after such an error the pool is drained, and for :data:`SUSPECT_SECONDS`
after the last one a connection is handed out only if it opened less than
:data:`FRESH_SECONDS` ago; older ones are closed and replaced. A call made
later than ``FRESH_SECONDS`` after the fault ended therefore runs on a session
opened after it.
"""

from __future__ import annotations

import time
import weakref

from psycopg import AsyncConnection
from psycopg import errors as pg_errors
from psycopg.rows import TupleRow

SESSION_ERRORS = (
    pg_errors.ReadOnlySqlTransaction,
    pg_errors.AdminShutdown,
    pg_errors.CrashShutdown,
    pg_errors.CannotConnectNow,
    pg_errors.IdleSessionTimeout,
    pg_errors.IdleInTransactionSessionTimeout,
    pg_errors.QueryCanceled,
)
"""Errors that say the session itself is unfit: read-only, canceled (a
``statement_timeout``), told to go away, timed out while idle."""

SUSPECT_SECONDS = 5.0
"""How long after the last session-state error sessions are handed out fresh only."""
FRESH_SECONDS = 0.5
"""A session opened less than this long ago counts as fresh."""


class Sessions:
    """When each pooled session opened, and whether the pool is under suspicion."""

    __slots__ = ("_opened", "_suspect_until")

    def __init__(self) -> None:
        self._opened: weakref.WeakKeyDictionary[AsyncConnection[TupleRow], float] = (
            weakref.WeakKeyDictionary()
        )
        self._suspect_until = 0.0

    def opened(self, conn: AsyncConnection[TupleRow]) -> None:
        """``conn`` was just opened (the pool's configure callback)."""
        self._opened[conn] = time.monotonic()

    def failed(self) -> None:
        """A call failed with a session-state error: suspect every session for a while."""
        self._suspect_until = time.monotonic() + SUSPECT_SECONDS

    def unfit(self, conn: AsyncConnection[TupleRow]) -> bool:
        """Whether ``conn`` must not be handed out: the pool is under suspicion
        and ``conn`` is not fresh."""
        now = time.monotonic()
        if now >= self._suspect_until:
            return False
        return now - self._opened.get(conn, 0.0) >= FRESH_SECONDS
