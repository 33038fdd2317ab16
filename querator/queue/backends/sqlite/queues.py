"""Queue management and the maintenance claim; each runs inside a :class:`Txn` it is handed."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row, delete, insert, select, update

from querator.errors import InvalidArgument, QueueExists, QueueNotFound
from querator.queue.backends.sqlite.rows import Txn, queue_info, seconds_us
from querator.queue.backends.sqlite.schema import (
    create_partitions,
    drop_partitions,
    maintenance,
    queues,
)
from querator.queue.models import QueueInfo, QueueSettings

__all__ = [
    "claim_maintenance",
    "create_queue",
    "delete_queue",
    "get_queue",
    "list_queues",
    "queues_with_dead_queue",
    "update_queue",
]


def _settings_values(settings: QueueSettings) -> dict[str, Any]:
    return {
        "lease_timeout": settings.lease_timeout,
        "expire_timeout": settings.expire_timeout,
        "max_attempts": settings.max_attempts,
        "dead_queue": settings.dead_queue,
        "reference": settings.reference,
        "partitions": settings.partitions,
    }


def _row(txn: Txn, name: str) -> Row[Any]:
    row = txn.conn.execute(select(queues).where(queues.c.name == name)).first()
    if row is None:
        raise QueueNotFound(name)
    return row


def create_queue(txn: Txn, name: str, settings: QueueSettings) -> QueueInfo:
    """Insert the queue and create its partition tables; QueueExists if the name is taken."""
    taken = txn.conn.execute(select(queues.c.id).where(queues.c.name == name)).first()
    if taken is not None:
        raise QueueExists(name)
    stmt = (
        insert(queues)
        .values(name=name, created_at=txn.now, **_settings_values(settings))
        .returning(*queues.c)
    )
    row = txn.conn.execute(stmt).one()
    create_partitions(txn.conn, row.id, range(settings.partitions))
    return queue_info(row)


def update_queue(txn: Txn, name: str, settings: QueueSettings) -> QueueInfo:
    """Store new settings and create added partitions; partitions may only grow."""
    old = _row(txn, name)
    if settings.partitions < old.partitions:
        raise InvalidArgument(
            "partitions",
            f"may only grow: the queue has {old.partitions}, got {settings.partitions}",
        )
    stmt = (
        update(queues)
        .where(queues.c.id == old.id)
        .values(**_settings_values(settings))
        .returning(*queues.c)
    )
    row = txn.conn.execute(stmt).one()
    create_partitions(txn.conn, row.id, range(old.partitions, settings.partitions))
    return queue_info(row)


def delete_queue(txn: Txn, name: str) -> None:
    """Drop the queue's tables and its row; QueueNotFound if absent."""
    row = _row(txn, name)
    drop_partitions(txn.conn, row.id, range(row.partitions))
    txn.conn.execute(delete(queues).where(queues.c.id == row.id))


def get_queue(txn: Txn, name: str) -> QueueInfo:
    """The queue's info; QueueNotFound if absent."""
    return queue_info(_row(txn, name))


def list_queues(txn: Txn, pivot: str | None, limit: int) -> list[QueueInfo]:
    """Queues with ``name >= pivot``, by name, at most ``limit``."""
    query = select(queues).order_by(queues.c.name).limit(limit)
    if pivot is not None:
        query = query.where(queues.c.name >= pivot)
    return [queue_info(row) for row in txn.conn.execute(query)]


def queues_with_dead_queue(txn: Txn, dead_queue: str) -> list[str]:
    """Names of the queues whose settings name ``dead_queue``, by name."""
    query = select(queues.c.name).where(queues.c.dead_queue == dead_queue).order_by(queues.c.name)
    return list(txn.conn.execute(query).scalars())


def claim_maintenance(txn: Txn, interval: float) -> bool:
    """Take the maintenance run if none was taken in the last ``interval`` seconds."""
    stmt = (
        update(maintenance)
        .where(maintenance.c.id == 1, maintenance.c.last_run <= txn.now - seconds_us(interval))
        .values(last_run=txn.now)
    )
    return txn.conn.execute(stmt).rowcount == 1
