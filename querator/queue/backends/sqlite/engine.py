"""Connections and transactions: WAL, ``BEGIN IMMEDIATE`` for writers, errors wrapped.

:class:`Store` keeps a small pool of raw ``sqlite3`` connections and runs each
operation in one transaction on one of them. pysqlite's own transaction
handling is switched off (``isolation_level = None``) and the store emits the
BEGIN itself. Writers take the write lock up front (``BEGIN IMMEDIATE``), so a
transaction never has to upgrade a read lock, which is where concurrent
writers deadlock or fail with "database is locked". Readers use a deferred
BEGIN and, in WAL mode, never block writers.

The raw connections (no SQLAlchemy engine or pool) and the cached statement
text of :mod:`.statements` are what make the hot paths cheap: checking out a
pooled SQLAlchemy connection and building, compiling and reading back Core
statements cost about half of a workflow step's CPU on this backend.
"""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from typing import TypeVar

from querator.clock import SYSTEM, Clock
from querator.errors import Unavailable
from querator.queue.backends.sqlite.failures import classify, is_missing_table
from querator.queue.backends.sqlite.rows import Txn, now_us, to_us

__all__ = ["BUSY_RETRIES", "BUSY_TIMEOUT", "Store", "is_missing_table"]

T = TypeVar("T")

BUSY_TIMEOUT = 10.0
"""Seconds a connection waits for another's lock before SQLite reports busy."""
BUSY_RETRIES = 3
"""Runs of a transaction that SQLite reported busy without waiting out ``BUSY_TIMEOUT``.

A busy error after the full wait means another connection held the lock that
long: it raises Unavailable at once rather than waiting again.
"""
IDLE_CONNECTIONS = 8
"""Connections kept open between operations; more are opened when threads need them."""
CACHED_STATEMENTS = 1024
"""Prepared statements each connection keeps: a few per partition table in use."""

_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(
        path,
        timeout=BUSY_TIMEOUT,
        isolation_level=None,
        check_same_thread=False,
        cached_statements=CACHED_STATEMENTS,
    )
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        conn.close()
        raise
    return conn


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
    text = str(exc)
    return "database is locked" in text or "database is busy" in text


class Store:
    """Runs operations in transactions on pooled connections and wakes queues after commit."""

    def __init__(
        self, path: str, notify: Callable[[Iterable[str]], None], clock: Clock = SYSTEM
    ) -> None:
        self.path = path
        """The database file."""
        self._notify = notify
        self._clock = clock
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    def run(self, op: Callable[[Txn], T], *, write: bool, queue: str | None = None) -> T:
        """Run ``op`` in one transaction (IMMEDIATE when ``write``), retrying when busy.

        A table missing under ``queue`` (dropped meanwhile) raises QueueNotFound;
        other driver failures are classified (:mod:`.failures`).
        """
        for attempt in range(BUSY_RETRIES):
            started = time.monotonic()
            try:
                return self._run_once(op, write)
            except sqlite3.OperationalError as exc:
                waited = time.monotonic() - started
                if _is_busy(exc) and waited < BUSY_TIMEOUT / 2 and attempt + 1 < BUSY_RETRIES:
                    time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))
                    continue
                raise classify(exc, queue) from exc
            except sqlite3.Error as exc:
                raise classify(exc, queue) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Close the idle connections; those in use are closed when their operation ends."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _run_once(self, op: Callable[[Txn], T], write: bool) -> T:
        conn = self._acquire()
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            given = self._clock.store_now()
            txn = Txn(conn, now_us() if given is None else to_us(given))
            result = op(txn)
            conn.execute("COMMIT")
        except BaseException:
            self._discard_transaction(conn)
            raise
        self._release(conn)
        if txn.wake:
            self._notify(txn.wake)
        return result

    def _discard_transaction(self, conn: sqlite3.Connection) -> None:
        """Roll back what ``conn`` holds and return it, or close it if that fails."""
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        except sqlite3.Error:
            conn.close()
            return
        self._release(conn)

    def _acquire(self) -> sqlite3.Connection:
        with self._lock:
            if self._closed:
                raise Unavailable("the SQLite backend is closed")
            if self._idle:
                return self._idle.pop()
        return _connect(self.path)

    def _release(self, conn: sqlite3.Connection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < IDLE_CONNECTIONS:
                self._idle.append(conn)
                return
        conn.close()
