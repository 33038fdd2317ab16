"""Queue management and the maintenance claim; each runs inside a :class:`Txn` it is handed."""

from __future__ import annotations

from typing import Any

from querator.errors import InvalidArgument, QueueExists, QueueNotEmpty, QueueNotFound
from querator.queue.backends.base import settings_wake
from querator.queue.backends.sqlite import statements as stmt
from querator.queue.backends.sqlite.rows import QueueRow, Txn, queue_info, seconds_us
from querator.queue.backends.sqlite.schema import create_partitions, drop_partitions
from querator.queue.models import QueueInfo, QueueSettings

__all__ = [
    "claim_maintenance",
    "create_queue",
    "delete_queue",
    "get_queue",
    "list_queues",
    "pause_queue",
    "queues_with_dead_queue",
    "update_queue",
]


def _settings_values(settings: QueueSettings) -> tuple[Any, ...]:
    return (
        settings.lease_timeout,
        settings.expire_timeout,
        settings.max_attempts,
        settings.dead_queue,
        settings.reference,
        settings.partitions,
    )


def _find(txn: Txn, name: str) -> QueueRow | None:
    row = txn.conn.execute(stmt.QUEUE_BY_NAME, (name,)).fetchone()
    return None if row is None else QueueRow(*row)


def _row(txn: Txn, name: str) -> QueueRow:
    row = _find(txn, name)
    if row is None:
        raise QueueNotFound(name)
    return row


def create_queue(txn: Txn, name: str, settings: QueueSettings) -> QueueInfo:
    """Insert the queue and create its partition tables; QueueExists if the name is taken."""
    if _find(txn, name) is not None:
        raise QueueExists(name)
    params = (name, txn.now, *_settings_values(settings))
    row = QueueRow(*txn.conn.execute(stmt.INSERT_QUEUE, params).fetchone())
    create_partitions(txn.conn, row.id, range(settings.partitions))
    return queue_info(row)


def update_queue(txn: Txn, name: str, settings: QueueSettings) -> QueueInfo:
    """Store new settings and create added partitions (partitions may only grow);
    every client is told after the commit."""
    old = _row(txn, name)
    if settings.partitions < old.partitions:
        raise InvalidArgument(
            "partitions",
            f"may only grow: the queue has {old.partitions}, got {settings.partitions}",
        )
    params = (*_settings_values(settings), old.id)
    row = QueueRow(*txn.conn.execute(stmt.UPDATE_QUEUE, params).fetchone())
    create_partitions(txn.conn, row.id, range(old.partitions, settings.partitions))
    txn.wake.add(settings_wake(name))
    return queue_info(row)


def pause_queue(txn: Txn, name: str, paused: bool) -> QueueInfo:
    """Mark the queue paused (or not); every client is told after the commit."""
    row = txn.conn.execute(stmt.PAUSE_QUEUE, (int(paused), name)).fetchone()
    if row is None:
        raise QueueNotFound(name)
    txn.wake.add(settings_wake(name))
    return queue_info(QueueRow(*row))


def delete_queue(txn: Txn, name: str, force: bool) -> None:
    """Drop the queue's tables and its row; QueueNotFound if absent, QueueNotEmpty
    if it holds items and not ``force`` (counted in the write transaction); every
    client is told after the commit."""
    row = _row(txn, name)
    if not force:
        count = sum(
            txn.conn.execute(stmt.count_items(row.id, n)).fetchone()[0]
            for n in range(row.partitions)
        )
        if count:
            raise QueueNotEmpty(name, count)
    drop_partitions(txn.conn, row.id, range(row.partitions))
    txn.conn.execute(stmt.DELETE_QUEUE, (row.id,))
    txn.wake.add(settings_wake(name))


def get_queue(txn: Txn, name: str) -> QueueInfo:
    """The queue's info; QueueNotFound if absent."""
    return queue_info(_row(txn, name))


def list_queues(txn: Txn, pivot: str | None, limit: int) -> list[QueueInfo]:
    """Queues with ``name >= pivot``, by name, at most ``limit``."""
    if pivot is None:
        rows = txn.conn.execute(stmt.LIST_QUEUES, (limit,))
    else:
        rows = txn.conn.execute(stmt.LIST_QUEUES_FROM, (pivot, limit))
    return [queue_info(QueueRow(*row)) for row in rows]


def queues_with_dead_queue(txn: Txn, dead_queue: str) -> list[str]:
    """Names of the queues whose settings name ``dead_queue``, by name."""
    return [row[0] for row in txn.conn.execute(stmt.QUEUES_WITH_DEAD_QUEUE, (dead_queue,))]


def claim_maintenance(txn: Txn, interval: float) -> bool:
    """Take the maintenance run if none was taken in the last ``interval`` seconds."""
    params = (txn.now, txn.now - seconds_us(interval))
    return txn.conn.execute(stmt.CLAIM_MAINTENANCE, params).rowcount == 1
