"""Wakeups for items produced inside an application's own SQLite transaction.

PostgreSQL sends the wakeup of such items with the application's commit
(``pg_notify``). SQLite has no hook a commit of someone else's connection runs,
so after producing on it, a watcher thread waits until the connection's
transaction has ended (committed or rolled back: a wakeup after a rollback is
harmless, the waiters look and find nothing) and then wakes every listener on
the file (:mod:`.wakeup`, this process's included). One watcher per
connection at a time; it checks the connection's ``in_transaction`` flag (no
database access) every few milliseconds, backing off to :data:`MAX_CHECK`,
and gives up after :data:`WATCH_LIMIT` (the items are then found within the
waiters' wait cap).
"""

from __future__ import annotations

import sqlite3
import threading
import time

from querator.queue.backends.sqlite.wakeup import Wakeup

__all__ = ["wake_after_commit"]

MAX_CHECK = 0.02
"""Longest pause, in seconds, between two looks at the connection's flag."""
WATCH_LIMIT = 3600.0
"""Seconds a watcher waits for the transaction to end."""

_LOCK = threading.Lock()
_PENDING: dict[int, set[str]] = {}
"""id(connection) -> queues its watcher wakes when the transaction ends."""


def wake_after_commit(conn: sqlite3.Connection, path: str, queue: str) -> None:
    """Wake the listeners on ``path`` for ``queue`` once ``conn``'s open
    transaction has ended (at once when none is open)."""
    key = id(conn)
    with _LOCK:
        if key in _PENDING:
            _PENDING[key].add(queue)
            return
        _PENDING[key] = {queue}
    thread = threading.Thread(
        target=_watch, args=(conn, key, path), name="querator-sqlite-commit-wake", daemon=True
    )
    thread.start()


def _open(conn: sqlite3.Connection) -> bool:
    try:
        return conn.in_transaction
    except sqlite3.ProgrammingError:  # closed
        return False


def _watch(conn: sqlite3.Connection, key: int, path: str) -> None:
    pause, deadline = 0.0005, time.monotonic() + WATCH_LIMIT
    while True:
        while _open(conn) and time.monotonic() < deadline:
            time.sleep(pause)
            pause = min(pause * 2, MAX_CHECK)
        with _LOCK:  # a produce in a newer transaction adds its queue under the lock
            if _open(conn) and time.monotonic() < deadline:
                continue
            queues = _PENDING.pop(key, set())
            break
    notifier = Wakeup(path)
    try:
        notifier.notify(queues)
    finally:
        notifier.close()
