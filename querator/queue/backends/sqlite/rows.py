"""The row-mapping boundary: microsecond integers and JSON text in, frozen records out.

Statements select the columns of :class:`ItemRow` and :class:`QueueRow` in
their field order (see :mod:`.statements`), so a plain ``sqlite3`` tuple maps
to its record without a row factory.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from querator.queue.backends.base import NewItem
from querator.queue.dead_reasons import marked
from querator.queue.ids import format_id
from querator.queue.models import KEPT, Leased, QueueInfo, QueueSettings, StoredItem

__all__ = [
    "ItemRow",
    "QueueRow",
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

    conn: sqlite3.Connection
    now: int
    """The host clock in microseconds, read once the transaction holds its lock."""
    wake: set[str] = field(default_factory=set)
    """Names of queues that may have become leasable; woken after commit."""


class ItemRow(NamedTuple):
    """One row of a partition table, in the column order every item statement selects."""

    seq: int
    version: int
    available_at: int
    lease_deadline: int | None
    client_id: str | None
    attempts: int
    expire_at: int
    payload: bytes
    kind: str
    encoding: str
    reference: str
    headers: str
    """JSON text of the headers dict."""
    dedup_key: str | None
    source_id: str | None
    created_at: int
    priority: int


class QueueRow(NamedTuple):
    """One row of the ``queues`` table, in the column order every queue statement selects."""

    id: int
    name: str
    lease_timeout: float
    expire_timeout: float
    max_attempts: int
    dead_queue: str | None
    reference: str
    partitions: int
    created_at: int
    paused: int


def now_us() -> int:
    """The host clock as integer microseconds since the epoch."""
    return time.time_ns() // 1_000


def to_us(instant: datetime) -> int:
    """A timezone-aware datetime as integer microseconds since the epoch."""
    return (instant - _EPOCH) // _MICROSECOND


KEPT_US = to_us(KEPT)
"""The ``expire_at`` of an item that never expires, in microseconds."""


def from_us(micros: int) -> datetime:
    """Integer microseconds since the epoch as a UTC datetime."""
    return _EPOCH + timedelta(microseconds=micros)


def seconds_us(seconds: float) -> int:
    """A duration in seconds as integer microseconds."""
    return round(seconds * 1_000_000)


def queue_info(row: QueueRow) -> QueueInfo:
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
        paused=bool(row.paused),
    )


def _item_fields(queue: QueueInfo, partition: int, row: ItemRow) -> dict[str, Any]:
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
        "priority": row.priority,
    }


def stored_item(queue: QueueInfo, partition: int, row: ItemRow) -> StoredItem:
    """Map a partition row to a :class:`StoredItem`."""
    return StoredItem.model_construct(**_item_fields(queue, partition, row))


def leased_item(
    queue: QueueInfo, partition: int, row: ItemRow, changes: Mapping[str, Any]
) -> Leased:
    """Map a partition row, with the columns in ``changes`` (microseconds) applied, to a Leased."""
    fields = _item_fields(queue, partition, row)
    for name, value in changes.items():
        fields[name] = from_us(value) if name in ("available_at", "lease_deadline") else value
    return Leased.model_construct(**fields)


def item_values(item: NewItem, now: int, expire_timeout: float) -> tuple[Any, ...]:
    """Parameters of :func:`.statements.insert_item` for a newly produced item."""
    available = now if item.available_at is None else to_us(item.available_at)
    return (
        available,
        max(available, now) + seconds_us(expire_timeout),
        item.payload,
        item.kind,
        item.encoding,
        item.reference,
        json.dumps(dict(item.headers), separators=(",", ":")),
        item.dedup_key,
        None,
        now,
        item.priority,
    )


def dead_values(
    row: ItemRow, source: tuple[str, str], now: int, expire_timeout: float | None, why: str
) -> tuple[Any, ...]:
    """Parameters of :func:`.statements.insert_item` for the copy a dead queue
    receives of ``row`` (``source``: its queue's name and its id; kept when
    ``expire_timeout`` is None), marked with its attempts, ``why`` and its
    queue (:mod:`querator.queue.dead_reasons`)."""
    queue, source_id = source
    headers = marked(json.loads(row.headers), row.attempts, why, queue)
    return (
        now,
        KEPT_US if expire_timeout is None else now + seconds_us(expire_timeout),
        row.payload,
        row.kind,
        row.encoding,
        row.reference,
        json.dumps(headers, separators=(",", ":")),
        None,
        source_id,
        now,
        row.priority,
    )
