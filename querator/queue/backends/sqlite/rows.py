"""The row-mapping boundary: microsecond integers and JSON text in, frozen records out."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Row

from querator.queue.backends.base import NewItem
from querator.queue.ids import format_id
from querator.queue.models import Leased, QueueInfo, QueueSettings, StoredItem

__all__ = [
    "Txn",
    "dead_values",
    "from_us",
    "item_values",
    "leased_item",
    "now_us",
    "queue_info",
    "seconds_us",
    "stored_item",
    "to_us",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


@dataclass(slots=True)
class Txn:
    """One open transaction: its connection, its instant and the queues to wake after commit."""

    conn: Connection
    now: int
    """The host clock in microseconds, read once the transaction holds its lock."""
    wake: set[str] = field(default_factory=set)
    """Names of queues that may have become leasable; woken after commit."""


def now_us() -> int:
    """The host clock as integer microseconds since the epoch."""
    return time.time_ns() // 1_000


def to_us(instant: datetime) -> int:
    """A timezone-aware datetime as integer microseconds since the epoch."""
    return (instant - _EPOCH) // _MICROSECOND


def from_us(micros: int) -> datetime:
    """Integer microseconds since the epoch as a UTC datetime."""
    return _EPOCH + timedelta(microseconds=micros)


def seconds_us(seconds: float) -> int:
    """A duration in seconds as integer microseconds."""
    return round(seconds * 1_000_000)


def queue_info(row: Row[Any]) -> QueueInfo:
    """Map a ``queues`` row to its record (stored settings were validated on the way in)."""
    settings = QueueSettings.model_construct(
        lease_timeout=row.lease_timeout,
        expire_timeout=row.expire_timeout,
        max_attempts=row.max_attempts,
        dead_queue=row.dead_queue,
        reference=row.reference,
        partitions=row.partitions,
    )
    return QueueInfo.model_construct(
        name=row.name,
        queue_id=row.id,
        settings=settings,
        created_at=from_us(row.created_at),
    )


def _item_fields(queue: QueueInfo, partition: int, row: Row[Any]) -> dict[str, Any]:
    deadline = row.lease_deadline
    return {
        "id": format_id(queue.queue_id, partition, row.seq),
        "version": row.version,
        "queue": queue.name,
        "partition": partition,
        "available_at": from_us(row.available_at),
        "lease_deadline": None if deadline is None else from_us(deadline),
        "client_id": row.client_id,
        "attempts": row.attempts,
        "expire_at": from_us(row.expire_at),
        "payload": bytes(row.payload),
        "kind": row.kind,
        "encoding": row.encoding,
        "reference": row.reference,
        "headers": json.loads(row.headers),
        "dedup_key": row.dedup_key,
        "source_id": row.source_id,
        "created_at": from_us(row.created_at),
    }


def stored_item(queue: QueueInfo, partition: int, row: Row[Any]) -> StoredItem:
    """Map a partition row to a :class:`StoredItem`."""
    return StoredItem.model_construct(**_item_fields(queue, partition, row))


def leased_item(
    queue: QueueInfo, partition: int, row: Row[Any], changes: Mapping[str, Any]
) -> Leased:
    """Map a partition row, with the columns in ``changes`` (microseconds) applied, to a Leased."""
    fields = _item_fields(queue, partition, row)
    for name, value in changes.items():
        fields[name] = from_us(value) if name in ("available_at", "lease_deadline") else value
    return Leased.model_construct(**fields)


def item_values(item: NewItem, now: int, expire_timeout: float) -> dict[str, Any]:
    """Column values of a newly produced item."""
    return {
        "version": 1,
        "available_at": now if item.available_at is None else to_us(item.available_at),
        "lease_deadline": None,
        "client_id": None,
        "attempts": 0,
        "expire_at": now + seconds_us(expire_timeout),
        "payload": item.payload,
        "kind": item.kind,
        "encoding": item.encoding,
        "reference": item.reference,
        "headers": json.dumps(dict(item.headers), separators=(",", ":")),
        "dedup_key": item.dedup_key,
        "source_id": None,
        "created_at": now,
    }


def dead_values(row: Row[Any], source_id: str, now: int, expire_timeout: float) -> dict[str, Any]:
    """Column values of the copy a dead queue receives of ``row``."""
    return {
        "version": 1,
        "available_at": now,
        "lease_deadline": None,
        "client_id": None,
        "attempts": 0,
        "expire_at": now + seconds_us(expire_timeout),
        "payload": row.payload,
        "kind": row.kind,
        "encoding": row.encoding,
        "reference": row.reference,
        "headers": row.headers,
        "dedup_key": None,
        "source_id": source_id,
        "created_at": now,
    }
