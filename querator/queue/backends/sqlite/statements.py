"""The SQL text of every operation; the hot ones built once per (table, shape) and cached.

Every operation executes these strings on the raw ``sqlite3`` connection:
building SQLAlchemy expressions, their cache keys and result proxies had cost
several times more CPU per operation than SQLite itself. The builders of the
hot paths are memoised, so the same string reaches sqlite3, whose own
statement cache then skips the prepare; stats, list_items and clear build
theirs on each (rare) call.

Identifiers come only from :func:`.schema.table_name` (internal integers);
every value is a bound ``?`` parameter. An ``IN`` list gets one placeholder
per element and a string per length: no dearer than binding a JSON array to
``json_each(?)`` for the short lists the queue works with (measured per
select: 15/17/12/28 µs against 22/16/16/40 µs for 1/3/10/50 keys).

``attempts < ?`` takes :func:`attempts_bound`, which turns "unlimited"
(``max_attempts = 0``) into a bound no item reaches, so one shape serves both.
"""

from __future__ import annotations

from functools import lru_cache

from querator.queue.backends.sqlite.rows import ItemRow, QueueRow
from querator.queue.backends.sqlite.schema import SWEEP_KEY, table_name

__all__ = [
    "CLAIM_MAINTENANCE",
    "DELETE_QUEUE",
    "INSERT_QUEUE",
    "LIST_QUEUES",
    "LIST_QUEUES_FROM",
    "QUEUES_WITH_DEAD_QUEUE",
    "QUEUE_BY_NAME",
    "UPDATE_QUEUE",
    "attempts_bound",
    "clear",
    "complete",
    "dead_due",
    "delete_seqs",
    "gauges",
    "insert_item",
    "leasable",
    "leasable_seqs",
    "lease_update",
    "list_items",
    "next_available",
    "renew",
    "retry",
    "select_dedup",
    "select_seqs",
    "seqs_by_dedup",
    "stats",
]

_CACHE = 4096
"""Statements kept per builder: partitions x IN-list lengths in use."""

_ITEM = ", ".join(ItemRow._fields)
_QUEUE = ", ".join(QueueRow._fields)
_SETTINGS = (
    "lease_timeout = ?, expire_timeout = ?, max_attempts = ?, dead_queue = ?, reference = ?,"
    " partitions = ?"
)


def attempts_bound(max_attempts: int) -> int:
    """The parameter of ``attempts < ?``: ``max_attempts``, or beyond reach when 0 (unlimited)."""
    return max_attempts or 2**62


def _marks(n: int) -> str:
    return ", ".join("?" * n)


# -- queues and maintenance ---------------------------------------------------

QUEUE_BY_NAME = f"SELECT {_QUEUE} FROM queues WHERE name = ?"
"""The queue row named ``?``."""
INSERT_QUEUE = (
    "INSERT INTO queues (name, created_at, lease_timeout, expire_timeout, max_attempts,"
    f" dead_queue, reference, partitions) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING {_QUEUE}"
)
"""Insert a queue row (name, created_at, then the settings) and return it."""
UPDATE_QUEUE = f"UPDATE queues SET {_SETTINGS} WHERE id = ? RETURNING {_QUEUE}"
"""Store a queue's settings (then its id) and return the row."""
PAUSE_QUEUE = f"UPDATE queues SET paused = ? WHERE name = ? RETURNING {_QUEUE}"
"""Pause (1) or resume (0) the queue named ``?``; returns its row."""
DELETE_QUEUE = "DELETE FROM queues WHERE id = ?"
"""Delete the queue row with id ``?``."""
LIST_QUEUES = f"SELECT {_QUEUE} FROM queues ORDER BY name LIMIT ?"
"""The first ``?`` queue rows by name."""
LIST_QUEUES_FROM = f"SELECT {_QUEUE} FROM queues WHERE name >= ? ORDER BY name LIMIT ?"
"""The first ``?`` queue rows by name from a pivot name."""
QUEUES_WITH_DEAD_QUEUE = "SELECT name FROM queues WHERE dead_queue = ? ORDER BY name"
"""Names of the queues whose dead queue is ``?``."""
CLAIM_MAINTENANCE = "UPDATE maintenance SET last_run = ? WHERE id = 1 AND last_run <= ?"
"""Take the maintenance run (now, then the latest last run that allows it)."""


# -- items: produce, lease, claim ---------------------------------------------


@lru_cache(maxsize=_CACHE)
def seqs_by_dedup(queue_id: int, partition: int, n: int) -> str:
    """``(seq, dedup_key)`` of the items holding any of ``n`` dedup keys."""
    name = table_name(queue_id, partition)
    return f"SELECT seq, dedup_key FROM {name} WHERE dedup_key IN ({_marks(n)})"


@lru_cache(maxsize=_CACHE)
def insert_item(queue_id: int, partition: int) -> str:
    """Insert a fresh item: the parameters of :func:`.rows.item_values` or ``dead_values``."""
    return (
        f"INSERT INTO {table_name(queue_id, partition)} (version, available_at, lease_deadline,"
        " client_id, attempts, expire_at, payload, kind, encoding, reference, headers, dedup_key,"
        " source_id, created_at, priority)"
        " VALUES (1, ?, NULL, NULL, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )


@lru_cache(maxsize=_CACHE)
def leasable(queue_id: int, partition: int, kinds: int = 0, level: str = "") -> str:
    """Leasable items (now, now, attempts bound, then ``kinds`` kinds when not 0)
    in lease order, at most ``?``. ``level`` "zero" takes priority 0 only,
    "at" one priority other than 0 (bound after the kinds), "" any."""
    where = {
        "": "",
        "zero": " AND priority = 0",
        "at": " AND priority <> 0 AND priority = ?",
    }[level]
    return (
        f"SELECT {_ITEM} FROM {table_name(queue_id, partition)}"
        " WHERE available_at <= ? AND expire_at > ? AND attempts < ?"
        f"{_kind_in(kinds)}{where} ORDER BY available_at, seq LIMIT ?"
    )


@lru_cache(maxsize=_CACHE)
def priority_below(queue_id: int, partition: int) -> str:
    """The highest priority other than 0 below ``?`` that any item has (one
    probe of the priority index, which holds only such items)."""
    return (
        f"SELECT priority FROM {table_name(queue_id, partition)}"
        " WHERE priority <> 0 AND priority < ? ORDER BY priority DESC LIMIT 1"
    )


def _kind_in(kinds: int) -> str:
    """The condition of a kind filter of ``kinds`` values (none when 0)."""
    return f" AND kind IN ({_marks(kinds)})" if kinds else ""


@lru_cache(maxsize=_CACHE)
def leasable_seqs(queue_id: int, partition: int, n: int) -> str:
    """Those of ``n`` seqs that are leasable (then now, now, attempts bound)."""
    return (
        f"SELECT {_ITEM} FROM {table_name(queue_id, partition)}"
        f" WHERE seq IN ({_marks(n)}) AND available_at <= ? AND expire_at > ? AND attempts < ?"
    )


@lru_cache(maxsize=_CACHE)
def lease_update(queue_id: int, partition: int, n: int) -> str:
    """Lease ``n`` seqs: deadline (as available_at and lease_deadline), client id,
    the lease's start (``leased_at``), then seqs."""
    return (
        f"UPDATE {table_name(queue_id, partition)} SET available_at = ?, lease_deadline = ?,"
        " client_id = ?, attempts = attempts + 1, version = version + 1, leased_at = ?"
        f" WHERE seq IN ({_marks(n)})"
    )


@lru_cache(maxsize=_CACHE)
def next_available(queue_id: int, partition: int, kinds: int = 0) -> str:
    """Earliest ``available_at`` of an item neither expired (now) nor exhausted
    (bound), of ``kinds`` kinds when not 0 (then the kinds)."""
    return (
        f"SELECT available_at FROM {table_name(queue_id, partition)}"
        f" WHERE expire_at > ? AND attempts < ?{_kind_in(kinds)} ORDER BY available_at LIMIT 1"
    )


# -- items: transact ----------------------------------------------------------


@lru_cache(maxsize=_CACHE)
def select_seqs(queue_id: int, partition: int, n: int) -> str:
    """The items with any of ``n`` seqs."""
    return f"SELECT {_ITEM} FROM {table_name(queue_id, partition)} WHERE seq IN ({_marks(n)})"


@lru_cache(maxsize=_CACHE)
def complete(queue_id: int, partition: int) -> str:
    """Delete the item with seq ``?``."""
    return f"DELETE FROM {table_name(queue_id, partition)} WHERE seq = ?"


@lru_cache(maxsize=_CACHE)
def complete_held(queue_id: int, partition: int) -> str:
    """Delete the item with seq ``?``; returns when its lease began (``leased_at``)."""
    return f"DELETE FROM {table_name(queue_id, partition)} WHERE seq = ? RETURNING leased_at"


@lru_cache(maxsize=_CACHE)
def retry(queue_id: int, partition: int) -> str:
    """Release the item with seq ``?`` (after its new available_at)."""
    return (
        f"UPDATE {table_name(queue_id, partition)} SET version = version + 1,"
        " lease_deadline = NULL, client_id = NULL, available_at = ? WHERE seq = ?"
    )


@lru_cache(maxsize=_CACHE)
def renew(queue_id: int, partition: int) -> str:
    """Extend the lease of the item with seq ``?`` (after the deadline, twice)."""
    return (
        f"UPDATE {table_name(queue_id, partition)} SET version = version + 1,"
        " lease_deadline = ?, available_at = ? WHERE seq = ?"
    )


# -- items: dead-lettering, lookup, inspection, deletion ----------------------


@lru_cache(maxsize=_CACHE)
def delete_seqs(queue_id: int, partition: int, n: int) -> str:
    """Delete the items with any of ``n`` seqs."""
    return f"DELETE FROM {table_name(queue_id, partition)} WHERE seq IN ({_marks(n)})"


@lru_cache(maxsize=_CACHE)
def dead_due(queue_id: int, partition: int) -> str:
    """Due (now) that expired (now) or are exhausted (max attempts), at most ``?3``.

    Parameters: now, the attempts bound, the limit. It walks the sweep's index
    (:data:`~querator.queue.backends.sqlite.schema.SWEEP_KEY`), so it reads the
    items it may move, not every due item of the partition."""
    return (
        f"SELECT {_ITEM} FROM {table_name(queue_id, partition)}"
        f" WHERE {SWEEP_KEY} <= ?1 AND available_at <= ?1 AND (expire_at <= ?1 OR attempts >= ?2)"
        f" ORDER BY {SWEEP_KEY} LIMIT ?3"
    )


@lru_cache(maxsize=_CACHE)
def select_dedup(queue_id: int, partition: int, n: int) -> str:
    """The items holding any of ``n`` dedup keys."""
    name = table_name(queue_id, partition)
    return f"SELECT {_ITEM} FROM {name} WHERE dedup_key IN ({_marks(n)})"


def scan_keys(queue_id: int, partition: int, include_low: bool, bounded: bool) -> str:
    """Items by dedup key from ``?`` (inclusive or not), below ``?`` when bounded; ``LIMIT ?``."""
    low = ">=" if include_low else ">"
    high = " AND dedup_key < ?" if bounded else ""
    return (
        f"SELECT {_ITEM} FROM {table_name(queue_id, partition)}"
        f" WHERE dedup_key {low} ?{high} ORDER BY dedup_key LIMIT ?"
    )


def count_items(queue_id: int, partition: int) -> str:
    """How many items the partition holds."""
    return f"SELECT count(*) FROM {table_name(queue_id, partition)}"


def stats(queue_id: int, partition: int) -> str:
    """Total, held (now, now), scheduled (now), dead-lettered and oldest created_at."""
    return (
        "SELECT count(*),"
        " coalesce(sum(lease_deadline IS NOT NULL AND lease_deadline > ?), 0),"
        " coalesce(sum(available_at > ? AND lease_deadline IS NULL), 0),"
        f" count(source_id), min(created_at) FROM {table_name(queue_id, partition)}"
    )


def gauges(queue_id: int, partition: int) -> str:
    """Bounded probes of one partition: items counted up to ``?``; the seq span;
    how many of the first ``?`` items not yet available (now) there are, and how
    many of them are held; the ``available_at`` of the first leasable item (now,
    now, attempts bound); the last seq handed out (``sqlite_sequence``: the
    tables are AUTOINCREMENT, so seqs never go back). Parameters: limit, now,
    limit, now, now, bound."""
    table = table_name(queue_id, partition)
    return (
        "SELECT c.n, s.span, w.total, w.held, h.head,"
        f" (SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = '{table}') FROM"
        f" (SELECT count(*) AS n FROM (SELECT 1 FROM {table} LIMIT ?)) AS c,"
        f" (SELECT max(seq) - min(seq) + 1 AS span FROM {table}) AS s,"
        " (SELECT count(*) AS total, coalesce(sum(lease_deadline IS NOT NULL), 0) AS held"
        f" FROM (SELECT lease_deadline FROM {table} WHERE available_at > ?"
        " ORDER BY available_at LIMIT ?)) AS w,"
        " (SELECT min(available_at) AS head FROM (SELECT available_at"
        f" FROM {table} WHERE available_at <= ? AND expire_at > ? AND attempts < ?"
        " ORDER BY available_at, seq LIMIT 1)) AS h"
    )


def list_items(queue_id: int, partition: int, pivot: bool, scheduled_only: bool) -> str:
    """Items by seq, at most ``?``: from a pivot seq ``?``, scheduled only (now) when asked."""
    where = []
    if pivot:
        where.append("seq >= ?")
    if scheduled_only:
        where.append("available_at > ? AND lease_deadline IS NULL")
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    return f"SELECT {_ITEM} FROM {table_name(queue_id, partition)}{clause} ORDER BY seq LIMIT ?"


def clear(queue_id: int, partition: int, destructive: bool) -> str:
    """Delete every item, or (not destructive) the unheld ones (now)."""
    name = table_name(queue_id, partition)
    if destructive:
        return f"DELETE FROM {name}"
    return f"DELETE FROM {name} WHERE lease_deadline IS NULL OR lease_deadline <= ?"
