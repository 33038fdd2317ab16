"""One call's pooled connection (:class:`PooledCall`): checked out fit to use,
held under the statement deadline (:mod:`.deadline`), its driver errors turned
into querator errors, put back whatever happens.

Every statement the backend runs goes through one, so it is a class with
``__aenter__``/``__aexit__`` rather than an ``@asynccontextmanager`` generator:
that costs a dozen Python calls less per statement.
"""

from __future__ import annotations

from types import TracebackType

import anyio
import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import AsyncConnectionPool

from querator.errors import QueratorError, Unavailable
from querator.queue.backends.postgres.deadline import Blocked, Cutoffs
from querator.queue.backends.postgres.failures import classify
from querator.queue.backends.postgres.items import Conn
from querator.queue.backends.postgres.replication import Timeline
from querator.queue.backends.postgres.sessions import Sessions, checkout, discard_if_unfit


class CallParts:
    """What every call of one backend shares: who decides whether a session may
    be handed out, the cut-offs, the blocked-calls log, the timeline."""

    __slots__ = ("blocked", "cutoffs", "sessions", "timeline")

    def __init__(
        self, sessions: Sessions, cutoffs: Cutoffs, blocked: Blocked, timeline: Timeline
    ) -> None:
        self.sessions = sessions
        self.cutoffs = cutoffs
        self.blocked = blocked
        self.timeline = timeline


class PooledCall:
    """``async with PooledCall(parts, pool, queue) as conn:`` a pooled autocommit
    connection for one call; driver errors become querator errors (naming
    ``queue`` where a table is missing).

    A statement that passes the deadline is cut off (:class:`~.deadline.Cutoffs`):
    the connection is closed and the call raises Unavailable, its outcome
    unknown. A lock waited on past the deadline raises the deadline's
    Unavailable; a session-state error discards the session and the idle ones.
    """

    __slots__ = ("_conn", "_cut", "_parts", "_pool", "_queue")

    def __init__(
        self, parts: CallParts, pool: AsyncConnectionPool[Conn], queue: str | None
    ) -> None:
        self._parts = parts
        self._pool = pool
        self._queue = queue

    async def __aenter__(self) -> Conn:
        try:
            self._conn = await checkout(self._pool, self._parts.sessions)
        except psycopg.Error as exc:
            raise classify(exc, self._queue) from exc
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
                return
            if isinstance(raised, psycopg.Error):
                raise classify(raised, self._queue) from raised
            if raised is not exc:
                raise raised
        except psycopg.Error as failed:  # closing a connection that broke
            raise classify(failed, self._queue) from failed
        finally:
            try:
                await self._pool.putconn(conn)
            except psycopg.Error as failed:
                raise classify(failed, self._queue) from failed

    async def _after_failure(self, exc: BaseException) -> None:
        cause = exc if isinstance(exc, psycopg.Error) else exc.__cause__
        if isinstance(cause, pg_errors.LockNotAvailable):
            raise Unavailable(self._parts.blocked.passed("waiting on a lock")) from cause
        await discard_if_unfit(self._pool, self._conn, cause, self._parts.sessions)
