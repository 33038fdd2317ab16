"""The one boundary where database rows become querator records."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from querator.queue.ids import format_id
from querator.queue.models import PartitionStats, QueueInfo, QueueSettings, StoredItem

ItemT = TypeVar("ItemT", bound=StoredItem)

Row = Sequence[Any]
"""A tuple row as psycopg returns it."""


def queue_info(row: Row) -> QueueInfo:
    """Map a row of ``statements.QUEUE_COLUMNS``."""
    queue_id, name, lease, expire, max_attempts, dead, reference, partitions, created = row
    settings = QueueSettings.model_construct(
        lease_timeout=lease,
        expire_timeout=expire,
        max_attempts=max_attempts,
        dead_queue=dead,
        reference=reference,
        partitions=partitions,
    )
    return QueueInfo.model_construct(
        name=name, queue_id=queue_id, settings=settings, created_at=created
    )


def settings_params(name: str, settings: QueueSettings) -> dict[str, Any]:
    """Bound parameters of INSERT_QUEUE and UPDATE_QUEUE."""
    return {
        "name": name,
        "lease_timeout": float(settings.lease_timeout),
        "expire_timeout": float(settings.expire_timeout),
        "max_attempts": settings.max_attempts,
        "dead_queue": settings.dead_queue,
        "reference": settings.reference,
        "partitions": settings.partitions,
    }


def item(cls: type[ItemT], queue: QueueInfo, partition: int, row: Row) -> ItemT:
    """Map a row of ``statements.ITEM_COLUMNS`` to ``cls`` (StoredItem or Leased)."""
    (seq, version, available_at, deadline, client_id, attempts, expire_at, payload, kind,
     encoding, reference, headers, dedup_key, source_id, created_at) = row  # fmt: skip
    return cls.model_construct(
        id=format_id(queue.queue_id, partition, seq),
        version=version,
        queue=queue.name,
        partition=partition,
        available_at=available_at,
        lease_deadline=deadline,
        client_id=client_id,
        attempts=attempts,
        expire_at=expire_at,
        payload=bytes(payload),
        kind=kind,
        encoding=encoding,
        reference=reference,
        headers=headers,
        dedup_key=dedup_key,
        source_id=source_id,
        created_at=created_at,
    )


def partition_stats(row: Row) -> PartitionStats:
    """Map a row of ``statements.STATS_BRANCH``."""
    partition, total, leased, scheduled, dead_lettered, oldest_age = row
    return PartitionStats.model_construct(
        partition=partition,
        total=total,
        leased=leased,
        scheduled=scheduled,
        dead_lettered=dead_lettered,
        oldest_age=oldest_age,
    )
