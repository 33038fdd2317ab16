"""Connections and transactions: WAL, ``BEGIN IMMEDIATE`` for writers, errors wrapped.

pysqlite's own transaction handling is switched off (``isolation_level = None``)
and the ``begin`` hook emits the BEGIN itself, the recipe of SQLAlchemy's
pysqlite documentation. Writers take the write lock up front (``BEGIN
IMMEDIATE``), so a transaction never has to upgrade a read lock, which is where
concurrent writers deadlock or fail with "database is locked". Readers use a
deferred BEGIN and, in WAL mode, never block writers.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from sqlalchemy import URL, Connection, Engine, create_engine, event
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.pool import ConnectionPoolEntry, QueuePool

from querator.errors import QueueNotFound, Unavailable
from querator.queue.backends.sqlite.rows import Txn, now_us

__all__ = ["Store", "make_engine"]

T = TypeVar("T")

BUSY_TIMEOUT = 10.0
"""Seconds a connection waits for another's lock before SQLite reports busy."""
BUSY_RETRIES = 3
"""Runs of a transaction that SQLite reported busy without waiting out ``BUSY_TIMEOUT``.

A busy error after the full wait means another connection held the lock that
long: it raises Unavailable at once rather than waiting again.
"""

_WRITE_OPTION = "querator_write"
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6


def _on_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
    finally:
        cursor.close()


def _on_begin(conn: Connection) -> None:
    write = conn.get_execution_options().get(_WRITE_OPTION, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def make_engine(path: str) -> Engine:
    """A pooled engine on the database file at ``path``, safe for many threads."""
    engine = create_engine(
        URL.create("sqlite+pysqlite", database=path),
        poolclass=QueuePool,
        pool_size=8,
        max_overflow=24,
        pool_timeout=BUSY_TIMEOUT * 3,
        query_cache_size=2_000,
        connect_args={"timeout": BUSY_TIMEOUT, "check_same_thread": False},
    )
    event.listen(engine, "connect", _on_connect)
    event.listen(engine, "begin", _on_begin)
    return engine


def _is_busy(exc: OperationalError) -> bool:
    orig = exc.orig
    code = getattr(orig, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
    text = str(orig)
    return "database is locked" in text or "database is busy" in text


def _missing_table(exc: OperationalError) -> bool:
    return isinstance(exc.orig, sqlite3.OperationalError) and "no such table" in str(exc.orig)


class Store:
    """Runs operations in transactions on one engine and wakes queues after commit."""

    def __init__(self, engine: Engine, notify: Callable[[Iterable[str]], None]) -> None:
        self.engine = engine
        self._notify = notify

    def run(self, op: Callable[[Txn], T], *, write: bool, queue: str | None = None) -> T:
        """Run ``op`` in one transaction (IMMEDIATE when ``write``), retrying when busy.

        A table missing under ``queue`` (dropped meanwhile) raises QueueNotFound;
        other driver failures raise Unavailable.
        """
        for attempt in range(BUSY_RETRIES):
            started = time.monotonic()
            try:
                return self._run_once(op, write)
            except OperationalError as exc:
                waited = time.monotonic() - started
                if _is_busy(exc) and waited < BUSY_TIMEOUT / 2 and attempt + 1 < BUSY_RETRIES:
                    time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))
                    continue
                if queue is not None and _missing_table(exc):
                    raise QueueNotFound(queue) from exc
                raise Unavailable(f"SQLite store failed: {exc.orig}") from exc
            except DBAPIError as exc:
                raise Unavailable(f"SQLite store failed: {exc.orig}") from exc
            except PoolTimeout as exc:
                raise Unavailable(f"SQLite store has no free connection: {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _run_once(self, op: Callable[[Txn], T], write: bool) -> T:
        with self.engine.connect() as conn:
            if write:
                conn.execution_options(**{_WRITE_OPTION: True})
            with conn.begin():
                txn = Txn(conn, now_us())
                result = op(txn)
        if txn.wake:
            self._notify(txn.wake)
        return result
