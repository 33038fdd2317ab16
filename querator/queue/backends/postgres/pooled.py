"""One call's pooled connection (:class:`PooledCall`): checked out fit to use,
held under the statement deadline (:mod:`.deadline`), its driver errors turned
into querator errors, put back whatever happens.

Every statement the backend runs goes through one, so it is a class with
``__aenter__``/``__aexit__`` rather than an ``@asynccontextmanager`` generator:
that costs a dozen Python calls less per statement. For the same reason a
backend keeps the connection of its last call out of the pool (:class:`Kept`)
for the next one: consecutive calls (a consumer's lease, complete, lease) skip
the pool's checkout and return.
"""

from __future__ import annotations

import time
from types import TracebackType

import anyio
import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus
from psycopg_pool import AsyncConnectionPool

from querator.errors import QueratorError, Unavailable
from querator.queue.backends.postgres.deadline import Blocked, Cutoffs
from querator.queue.backends.postgres.failures import classify
from querator.queue.backends.postgres.items import Conn
from querator.queue.backends.postgres.replication import Timeline
from querator.queue.backends.postgres.sessions import (
    SESSION_ERRORS,
    Sessions,
    checkout,
    discard_if_unfit,
)

KEEP_SECONDS = 1.0
"""How long one connection stays out of the pool as :class:`Kept` before it goes
back (so the pool's lifetime, drain and health rules still reach it)."""

_IDLE = TransactionStatus.IDLE


class Kept:
    """The one connection a backend holds between two calls, and since when.

    A call takes it if it is there (no checkout) and, when it ends well, puts
    its connection here instead of into the pool: unless one is already kept,
    another call of the backend is waiting for the pool (which then gets it),
    the connection is not idle, or it has been out of the pool for
    :data:`KEEP_SECONDS`. A kept connection the sessions rule says is unfit is
    not used: it goes back to the pool, as does any after a session-state error.
    """

    __slots__ = ("conn", "since", "waiting")

    def __init__(self) -> None:
        self.conn: Conn | None = None
        self.since = 0.0
        self.waiting = 0
        """Calls of this backend waiting in the pool's checkout."""

    def fit(self, conn: Conn, sessions: Sessions) -> bool:
        """Whether the just-taken kept ``conn`` may serve another call."""
        return (
            not conn.closed
            and not sessions.unfit(conn)
            and time.monotonic() - self.since < KEEP_SECONDS
        )

    def keep(self, conn: Conn, since: float, pool: AsyncConnectionPool[Conn]) -> bool:
        """Keep ``conn`` (out of the pool since ``since``) after a call that ended
        well, if nothing stands against it; whether it was kept."""
        if (
            self.conn is not None
            or self.waiting
            or pool.closed
            or conn.pgconn.transaction_status != _IDLE
        ):
            return False
        self.conn, self.since = conn, since
        return True

    async def give_back(self, pool: AsyncConnectionPool[Conn]) -> None:
        """Put the kept connection (if any) back into ``pool``: on close, or after
        a session-state error."""
        conn, self.conn = self.conn, None
        if conn is not None:
            await pool.putconn(conn)


class CallParts:
    """What every call of one backend shares: who decides whether a session may
    be handed out, the cut-offs, the blocked-calls log, the timeline, the
    connection kept between calls."""

    __slots__ = ("blocked", "cutoffs", "kept", "sessions", "timeline")

    def __init__(
        self, sessions: Sessions, cutoffs: Cutoffs, blocked: Blocked, timeline: Timeline
    ) -> None:
        self.sessions = sessions
        self.cutoffs = cutoffs
        self.blocked = blocked
        self.timeline = timeline
        self.kept = Kept()


class PooledCall:
    """``async with PooledCall(parts, pool, queue) as conn:`` a pooled autocommit
    connection for one call; driver errors become querator errors (naming
    ``queue`` where a table is missing).

    A statement that passes the deadline is cut off (:class:`~.deadline.Cutoffs`):
    the connection is closed and the call raises Unavailable, its outcome
    unknown. A lock waited on past the deadline raises the deadline's
    Unavailable; a session-state error discards the session and the idle ones.
    """

    __slots__ = ("_conn", "_cut", "_parts", "_pool", "_queue", "_since")

    def __init__(
        self, parts: CallParts, pool: AsyncConnectionPool[Conn], queue: str | None
    ) -> None:
        self._parts = parts
        self._pool = pool
        self._queue = queue

    async def __aenter__(self) -> Conn:
        parts, pool = self._parts, self._pool
        kept = parts.kept
        conn = kept.conn
        if conn is not None:
            kept.conn = None
            if not kept.fit(conn, parts.sessions):
                await self._put_back(conn)
                conn = None
        if conn is None:
            kept.waiting += 1
            try:
                conn = await checkout(pool, parts.sessions)
            except psycopg.Error as exc:
                raise classify(exc, self._queue) from exc
            finally:
                kept.waiting -= 1
            self._since = time.monotonic()
        else:
            self._since = kept.since
        self._conn = conn
        self._cut = cut = anyio.CancelScope()
        cut.__enter__()
        self._parts.cutoffs.start(cut)
        return self._conn

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        parts, conn, cut = self._parts, self._conn, self._cut
        raised = exc
        keep = False
        try:
            if isinstance(exc, (psycopg.Error, QueratorError)):
                try:
                    await self._after_failure(exc)
                except BaseException as new:  # the deadline's Unavailable, or a cut-off
                    raised = new
            parts.cutoffs.end(cut)
            if raised is None:
                swallowed = cut.__exit__(None, None, None)
            else:
                swallowed = cut.__exit__(type(raised), raised, raised.__traceback__)
            if swallowed:  # the cut-off's own cancellation
                await conn.close()
                reason = parts.blocked.passed("no answer: cut off, outcome unknown")
                raise Unavailable(reason)
            if raised is None:
                parts.timeline.answered()
                if parts.blocked.blocked:
                    parts.blocked.completed()
                keep = parts.kept.keep(conn, self._since, self._pool)
                return
            if isinstance(raised, psycopg.Error):
                raise classify(raised, self._queue) from raised
            if raised is not exc:
                raise raised
        except psycopg.Error as failed:  # closing a connection that broke
            raise classify(failed, self._queue) from failed
        finally:
            if not keep:
                await self._put_back(conn)

    async def _put_back(self, conn: Conn) -> None:
        try:
            await self._pool.putconn(conn)
        except psycopg.Error as failed:
            raise classify(failed, self._queue) from failed

    async def _after_failure(self, exc: BaseException) -> None:
        cause = exc if isinstance(exc, psycopg.Error) else exc.__cause__
        if isinstance(cause, pg_errors.LockNotAvailable):
            raise Unavailable(self._parts.blocked.passed("waiting on a lock")) from cause
        await discard_if_unfit(self._pool, self._conn, cause, self._parts.sessions)
        if isinstance(cause, SESSION_ERRORS):
            await self._parts.kept.give_back(self._pool)
