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

import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import psycopg
from psycopg import AsyncConnection
from psycopg import errors as pg_errors
from psycopg.rows import TupleRow

from querator.queue.backends.postgres import statements as stmt
from querator.queue.backends.postgres.array_params import register as register_arrays
from querator.queue.backends.postgres.deadline import lock_timeout
from querator.queue.backends.postgres.replication import WHERE_AM_I, Timeline

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

log = logging.getLogger("querator.postgres")

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

    def suspected(self) -> bool:
        """Whether sessions are under suspicion now (after a session-state error)."""
        return time.monotonic() < self._suspect_until

    def unfit(self, conn: AsyncConnection[TupleRow]) -> bool:
        """Whether ``conn`` must not be handed out: the pool is under suspicion
        and ``conn`` is not fresh."""
        now = time.monotonic()
        if now >= self._suspect_until:
            return False
        return now - self._opened.get(conn, 0.0) >= FRESH_SECONDS


def configurer(
    deadline: float, sessions: Sessions, timeline: Timeline
) -> Callable[[AsyncConnection[TupleRow]], Awaitable[None]]:
    """The pool's ``configure`` callback: session settings, ``lock_timeout`` =
    ``deadline``, where the session writes (``timeline``), when it opened."""

    async def configure(conn: AsyncConnection[TupleRow]) -> None:
        register_arrays(conn.adapters)
        await conn.execute(stmt.SESSION_SETTINGS)
        await conn.execute(lock_timeout(deadline))
        try:
            cur = await conn.execute(WHERE_AM_I)
            system, written_on = await cur.fetchone() or (0, None)
        except psycopg.DatabaseError as exc:  # a server that hides its control data
            log.debug("timeline unknown: %s", type(exc).__name__)
        else:
            timeline.opened_on(system, written_on)
        sessions.opened(conn)

    return configure


async def checkout(
    pool: AsyncConnectionPool[AsyncConnection[TupleRow]], sessions: Sessions
) -> AsyncConnection[TupleRow]:
    """A connection of ``pool`` fit to use: while the pool is under suspicion,
    older sessions are closed and replaced."""
    while True:
        conn = await pool.getconn()
        if not sessions.unfit(conn):
            return conn
        await conn.close()
        await pool.putconn(conn)


async def discard_if_unfit(
    pool: AsyncConnectionPool[AsyncConnection[TupleRow]],
    conn: AsyncConnection[TupleRow],
    cause: BaseException | None,
    sessions: Sessions,
) -> None:
    """After a call on ``conn`` failed with ``cause``: a session-state error closes
    ``conn``, replaces the pool's idle sessions and puts the pool under suspicion."""
    if isinstance(cause, SESSION_ERRORS):
        sessions.failed()
        await conn.close()
        await pool.drain()
