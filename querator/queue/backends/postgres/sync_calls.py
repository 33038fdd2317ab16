"""The sync I/O shell of the PostgreSQL hot calls: lease, one-table complete,
retry and renew, and unkeyed produce, run on the calling thread on a
connection that thread holds.

The statements, parameters and row decoding are the async backend's own
(sans I/O: :meth:`.backend.PostgresBackend.lease_call` with
:func:`.rows.leases_of`, :func:`.transact.table_complete_call`,
:func:`.retry_at_once.retry_call`, :func:`.renew_at_once.renew_call`,
:class:`.items.UnkeyedInsert`); this module only runs them on a blocking
psycopg connection, so the sync client's consecutive hot calls cross no
thread and check nothing out of a pool.

Each thread gets its own session, configured as the pool's are (UTC, one
generic plan, ``lock_timeout`` = the statement deadline). The client-side
cut-off of the async calls (:mod:`.deadline`) is kept by one watchdog thread
per backend, started with the first call: a statement still running
:data:`~.deadline.MARGIN` seconds past the deadline is cancelled and its call
raises Unavailable, its outcome unknown. A session that fails is closed and
the next call opens another; the errors are the async calls' (:func:`.failures.classify`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import TupleRow

from querator.errors import Unavailable
from querator.queue.backends.base import Kinds, Leases, NewItem, TableRefs
from querator.queue.backends.postgres import statements as stmt
from querator.queue.backends.postgres.array_params import register as register_arrays
from querator.queue.backends.postgres.deadline import MARGIN, Blocked, lock_timeout
from querator.queue.backends.postgres.failures import classify
from querator.queue.backends.postgres.items import UnkeyedInsert
from querator.queue.backends.postgres.renew_at_once import renew_call, renewed_rows
from querator.queue.backends.postgres.retry_at_once import retry_call
from querator.queue.backends.postgres.sessions import SESSION_ERRORS, Sessions
from querator.queue.backends.postgres.transact import failed_check, table_complete_call
from querator.queue.models import Leased, QueueInfo

SyncConn = psycopg.Connection[TupleRow]


class _Held(threading.local):
    """The calling thread's session (None until its first call), and the cursor
    its calls run on (one for all: a cursor per statement costs more)."""

    conn: SyncConn | None = None
    cursor: psycopg.Cursor[TupleRow] | None = None


MAX_SESSIONS = 8
"""Threads that may hold a session of their own at once: a process with many
threads (a worker's thread pool running sync steps that call the client) opens
at most this many connections beside the pool; callers on further threads take
the loop thread and the pool, as before."""


class LeasePlans(Protocol):
    """The backend's sans-I/O lease calls (:class:`~.backend.PostgresBackend`)."""

    def prioritized(self, queue: QueueInfo, partition: int) -> bool: ...
    def mark_prioritized(self, queue: QueueInfo, partition: int) -> bool: ...
    def probe_call(self, queue: QueueInfo, partition: int) -> bytes: ...
    def lease_call(
        self,
        queue: QueueInfo,
        partition: int,
        client_id: str,
        limit: int,
        kinds: Kinds = None,
        by_priority: bool = False,
        done: TableRefs | None = None,
    ) -> tuple[bytes, dict[str, Any]]: ...
    def leased_rows(
        self, queue: QueueInfo, partition: int, found: list[Any], client_id: str, by_priority: bool
    ) -> Leases: ...


class SyncCalls:
    """The hot calls of one :class:`~.backend.PostgresBackend` for sync callers.

    ``plans`` is the backend's own lease statement builder; ``sessions`` and
    ``blocked`` its session rule and blocked-calls log: while either says the
    store is in trouble, :meth:`usable` is False and the callers take the
    async path, which handles the episode. ``citus``: the store is a Citus
    coordinator (retries and renews take the async path, which runs them in a
    transaction).
    """

    def __init__(
        self,
        conninfo: str,
        names: stmt.Names,
        deadline: float,
        plans: LeasePlans,
        sessions: Sessions,
        blocked: Blocked,
        citus: bool = False,
    ) -> None:
        self._conninfo = conninfo
        self._citus = citus
        self._names = names
        self._deadline = deadline
        self._plans = plans
        self._sessions = sessions
        self._blocked = blocked
        self._held = _Held()
        self._all: dict[SyncConn, threading.Thread] = {}
        """Every open session and its thread (a dead thread's is closed later)."""
        self._lock = threading.Lock()
        self._reserved: set[threading.Thread] = set()
        """Threads allowed a session they have not opened yet (see :meth:`usable`)."""
        self._closed = False
        self._watch = _Watchdog(deadline + MARGIN)

    def usable(self) -> bool:
        """Whether the hot calls may run here now: not closed, no episode under
        way, and this thread holds a session or may open one (at most
        :data:`MAX_SESSIONS` threads hold one; callers on others take the pool)."""
        if self._closed or self._blocked.blocked or self._sessions.suspected():
            return False
        held = self._held.conn
        if held is not None and not held.closed:
            return True
        me = threading.current_thread()
        with self._lock:
            if me in self._reserved:
                return True
            live = sum(1 for c, t in self._all.items() if not c.closed and t.is_alive())
            live += sum(1 for t in self._reserved if t.is_alive())
            if live >= MAX_SESSIONS:
                return False
            self._reserved.add(me)  # this thread's session, opened by its first call
        return True

    def sessions(self) -> int:
        """Sessions open now (one per thread that made hot calls, at most about
        :data:`MAX_SESSIONS`)."""
        with self._lock:
            return sum(1 for c in self._all if not c.closed)

    def lease(
        self,
        queue: QueueInfo,
        partition: int,
        client_id: str,
        limit: int,
        kinds: Kinds,
        done: TableRefs | None = None,
    ) -> Leases | None:
        """:meth:`.backend.PostgresBackend.lease`, on this thread's session,
        completing ``done`` first in the same statement (apart on Citus or in a
        partition leased by priority); None when a check of ``done`` failed
        (nothing changed)."""
        plans = self._plans
        by_priority = plans.prioritized(queue, partition)
        apart = by_priority or self._citus
        statement, params = plans.lease_call(
            queue, partition, client_id, limit, kinds, by_priority, None if apart else done
        )
        if done is not None and apart:
            if not self.complete(done, params["now"]):
                return None
            done = None
        try:
            found = self._run(
                queue.name, statement, params, binary=True, fetch=True, checked=done is not None
            )
        except _CheckFailed:
            return None
        if done is not None:  # LEASE_COMPLETING's all-NULL row when it leased nothing
            found = [row for row in found if row[0] is not None]
        if not found and not by_priority:
            probe = self._run(queue.name, plans.probe_call(queue, partition), {}, fetch=True)
            if probe and probe[0][0]:
                by_priority = plans.mark_prioritized(queue, partition)
                statement, params = plans.lease_call(
                    queue, partition, client_id, limit, kinds, by_priority
                )
                found = self._run(queue.name, statement, params, binary=True, fetch=True)
        return plans.leased_rows(queue, partition, found, client_id, by_priority)

    def complete(self, refs: TableRefs, now: datetime | None) -> bool:
        """The backend's ``transact`` path 1 (:func:`.transact.complete_at_once`)
        on this thread's session; False when a check failed (nothing changed)."""
        statement, args = table_complete_call(self._names, refs, now)
        try:
            self._run(refs.queue, statement, args, checked=True)
        except _CheckFailed:
            return False
        return True

    def retry(self, refs: TableRefs, retry_at: datetime | None, now: datetime | None) -> bool:
        """The backend's ``transact`` path 0 (:mod:`.retry_at_once`) on this
        thread's session, waking the queue; False when the store cannot run it
        (Citus) or a check failed (nothing changed)."""
        if self._citus:
            return False
        statement, args = retry_call(self._names, refs, retry_at, (refs.queue,), True, now)
        try:
            self._run(refs.queue, statement, args, checked=True)
        except _CheckFailed:
            return False
        return True

    def renew(
        self, queue: QueueInfo, refs: TableRefs, extend: float, now: datetime | None
    ) -> list[Leased] | None:
        """The backend's ``transact`` path r (:mod:`.renew_at_once`) on this
        thread's session: the renewed items in ``refs``' order, or None when the
        store cannot run it (Citus) or a check failed (nothing changed)."""
        if self._citus:
            return None
        statement, args = renew_call(self._names, refs, extend, now)
        try:
            found = self._run(refs.queue, statement, args, fetch=True, checked=True)
        except _CheckFailed:
            return None
        return renewed_rows(queue, refs, found)

    def insert_unkeyed(
        self, queue: QueueInfo, items: Sequence[NewItem], now: datetime | None
    ) -> list[str]:
        """:func:`.items.insert_unkeyed` on this thread's session."""
        call = UnkeyedInsert(self._names, queue, items, now)
        return call.ids(self._run(queue.name, call.statement, call.params, fetch=True))

    def close(self) -> None:
        """Close every thread's session (the backend is closing)."""
        with self._lock:
            self._closed = True
            conns = list(self._all)
            self._all.clear()
        for conn in conns:
            conn.close()
        self._watch.stop()

    # -- plumbing -------------------------------------------------------------

    def _session(self) -> SyncConn:
        conn = self._held.conn
        if conn is not None and not conn.closed:
            return conn
        conn = psycopg.connect(self._conninfo, autocommit=True)
        try:
            register_arrays(conn.adapters)
            conn.execute(stmt.SESSION_SETTINGS)
            conn.execute(lock_timeout(self._deadline))
        except BaseException:
            conn.close()
            raise
        with self._lock:
            if self._closed:
                conn.close()
                raise Unavailable("the PostgreSQL backend is closed")
            gone = [c for c, thread in self._all.items() if c.closed or not thread.is_alive()]
            for old in gone:
                del self._all[old]
            self._all[conn] = threading.current_thread()
            self._reserved.discard(threading.current_thread())
            self._reserved = {t for t in self._reserved if t.is_alive()}
        for old in gone:
            old.close()
        self._held.conn = conn
        self._held.cursor = conn.cursor()
        return conn

    def _run(
        self,
        queue: str,
        statement: bytes,
        params: dict[str, Any],
        *,
        binary: bool = False,
        fetch: bool = False,
        checked: bool = False,
    ) -> list[Any]:
        conn: SyncConn | None = None
        try:
            conn = self._session()
            cur = self._held.cursor
            assert cur is not None  # opened with the session
            self._watch.start(conn)
            try:
                cur.execute(statement, params, binary=binary)
                found = cur.fetchall() if fetch else []
            finally:
                cut = self._watch.end(conn)
            if cut:
                raise _cut_off(conn, self._blocked)
            return found
        except psycopg.Error as exc:
            if checked and failed_check(exc):
                raise _CheckFailed from exc
            if conn is not None and self._watch.was_cut(conn):
                raise _cut_off(conn, self._blocked) from exc
            if isinstance(exc, pg_errors.LockNotAvailable):  # lock_timeout: the deadline's
                raise Unavailable(self._blocked.passed("waiting on a lock")) from exc
            if isinstance(exc, SESSION_ERRORS):
                self._sessions.failed()
            if conn is not None and (isinstance(exc, SESSION_ERRORS) or conn.broken):
                conn.close()
            raise classify(exc, queue) from exc


class _CheckFailed(Exception):
    """A self-checking complete's check failed (nothing changed)."""


def _cut_off(conn: SyncConn, blocked: Blocked) -> Unavailable:
    conn.close()
    return Unavailable(blocked.passed("no answer: cut off, outcome unknown"))


class _Watchdog:
    """Cancels statements still running ``cutoff`` seconds after they started.

    One daemon thread, started with the first call, looks at the calls in
    flight every quarter of the cut-off (so a call is cut off between 1 and
    1.25 cut-offs after it started) and stops when the backend closes.
    """

    def __init__(self, cutoff: float) -> None:
        self._cutoff = cutoff
        self._flight: dict[SyncConn, float] = {}
        self._cut: set[SyncConn] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, conn: SyncConn) -> None:
        """A statement starts on ``conn``."""
        with self._lock:
            self._flight[conn] = time.monotonic()
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="querator-cutoffs", daemon=True
                )
                self._thread.start()

    def end(self, conn: SyncConn) -> bool:
        """The statement on ``conn`` ended; whether it was cut off."""
        with self._lock:
            self._flight.pop(conn, None)
            return conn in self._cut

    def was_cut(self, conn: SyncConn) -> bool:
        """Whether the statement that just failed on ``conn`` was cut off."""
        with self._lock:
            self._flight.pop(conn, None)
            return conn in self._cut

    def stop(self) -> None:
        """Stop the watchdog thread."""
        self._stop.set()

    def _run(self) -> None:
        period = max(0.05, self._cutoff / 4)
        while not self._stop.wait(period):
            now = time.monotonic()
            with self._lock:
                overdue = [c for c, began in self._flight.items() if now - began >= self._cutoff]
                self._cut.update(overdue)
            for conn in overdue:
                with contextlib.suppress(psycopg.Error):
                    conn.cancel_safe(timeout=1.0)
