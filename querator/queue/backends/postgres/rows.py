"""The one boundary where database rows become querator records."""

from __future__ import annotations

import functools
import json
import operator
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar

from querator.queue.backends.base import Leases
from querator.queue.backends.postgres.schema import ITEM_POSITION
from querator.queue.ids import id_prefix
from querator.queue.models import (
    Leased,
    PartitionGauges,
    PartitionStats,
    QueueInfo,
    QueueSettings,
    StoredItem,
)

ItemT = TypeVar("ItemT", bound=StoredItem)

Row = Sequence[Any]
"""A tuple row as psycopg returns it."""


def queue_info(row: Row) -> QueueInfo:
    """Map a row of ``statements.QUEUE_COLUMNS``."""
    queue_id, name, lease, expire, max_attempts, dead, reference, partitions, created, paused = row
    settings = QueueSettings.model_construct(
        lease_timeout=lease,
        expire_timeout=expire,
        max_attempts=max_attempts,
        dead_queue=dead,
        reference=reference,
        partitions=partitions,
    )
    return QueueInfo.model_construct(
        name=name, queue_id=queue_id, settings=settings, created_at=created, paused=paused
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
    values = _values(queue.name, partition, id_prefix(queue.queue_id, partition), row)
    return _record(cls, values, _plain_fields(cls))


def _values(name: str, partition: int, prefix: str, row: Row) -> dict[str, Any]:
    """The fields of an item row of ``name``'s ``partition``, its id ``prefix``
    (:func:`~querator.queue.ids.id_prefix`) + seq; headers arrive as JSON text
    and ``{}`` skips the parser."""
    (seq, version, available_at, deadline, client_id, attempts, expire_at, payload, kind,
     encoding, reference, headers, dedup_key, source_id, created_at, priority) = row  # fmt: skip
    return {
        "id": prefix + str(seq),
        "version": version,
        "queue": name,
        "partition": partition,
        "available_at": available_at,
        "lease_deadline": deadline,
        "client_id": client_id,
        "attempts": attempts,
        "expire_at": expire_at,
        "payload": payload if type(payload) is bytes else bytes(payload),
        "kind": kind,
        "encoding": encoding,
        "reference": reference,
        "headers": {} if headers == "{}" else json.loads(headers),
        "dedup_key": dedup_key,
        "source_id": source_id,
        "created_at": created_at,
        "priority": priority,
    }


def _record(cls: type[ItemT], values: dict[str, Any], fields_set: set[str] | None) -> ItemT:
    """``cls`` holding ``values``: built the way ``model_construct`` does (every
    field given, trusted values) without its per-field loop, when ``fields_set``
    (:func:`_plain_fields`) says that is all it would do."""
    if fields_set is None:
        return cls.model_construct(**values)
    record = cls.__new__(cls)
    _set_attribute(record, "__dict__", values)
    _set_attribute(record, "__pydantic_fields_set__", fields_set)
    _set_attribute(record, "__pydantic_extra__", None)
    _set_attribute(record, "__pydantic_private__", None)
    return record


_set_attribute = object.__setattr__


@functools.cache
def _plain_fields(cls: type[StoredItem]) -> set[str] | None:
    """The fields set :func:`item` shares among records of ``cls``, or None when
    ``model_construct`` would do more than set ``__dict__`` and bookkeeping (aliases,
    private attributes, a post-init hook, other fields than an item row's).

    Sharing one set is safe: the records are frozen, and ``model_copy`` copies it.
    """
    plain = (
        cls.__pydantic_post_init__ is None
        and not cls.__private_attributes__
        and not cls.__pydantic_root_model__
        and not any(f.alias or f.validation_alias for f in cls.__pydantic_fields__.values())
        and set(cls.__pydantic_fields__) == ITEM_FIELDS
    )
    return set(ITEM_FIELDS) if plain else None


ITEM_FIELDS = frozenset(
    ("id", "version", "queue", "partition", "available_at", "lease_deadline", "client_id",
     "attempts", "expire_at", "payload", "kind", "encoding", "reference", "headers",
     "dedup_key", "source_id", "created_at", "priority")
)  # fmt: skip
"""The fields :func:`item` fills."""


def partition_gauges(row: Row, limit: int) -> PartitionGauges:
    """Map a row of ``statements.GAUGES_BRANCH``: past ``limit`` items the depth is
    the planner's estimate (never below the count; the count when there is none)."""
    partition, counted, waiting, held, oldest_age, estimate = row
    full = counted >= limit or waiting >= limit
    depth = counted if counted < limit else max(counted, round(estimate or 0))
    return PartitionGauges.model_construct(
        partition=partition,
        depth=depth,
        leased=held,
        scheduled=waiting - held,
        oldest_age=None if oldest_age is None else max(0.0, oldest_age),
        exact=not full,
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


_LEASE_ORDER = operator.itemgetter(0, 1)
"""A leased row's order: ``available_at`` before the lease, then ``seq``."""

_PRIORITY_AT = 1 + ITEM_POSITION["priority"]


def _priority_order(row: Sequence[Any]) -> tuple[int, datetime, int]:
    """A leased row's order: higher priority first, then ``available_at`` before
    the lease, then ``seq``."""
    return -row[_PRIORITY_AT], row[0], row[1]


def leases_of(
    queue: QueueInfo, partition: int, found: list[Any], client_id: str, by_priority: bool = False
) -> Leases:
    """The rows a lease statement of ``partition`` by ``client_id`` returned
    (:data:`~.statements.LEASED_COLUMNS`), as leased records in lease order
    (``by_priority``: higher priorities first) with how long each waited (sorts
    ``found`` in place)."""
    found.sort(key=_priority_order if by_priority else _LEASE_ORDER)
    timeout = float(queue.settings.lease_timeout)
    name = queue.name
    prefix = id_prefix(queue.queue_id, partition)
    fields_set = _plain_fields(Leased)
    leases = Leases([], [])
    items, waited = leases
    for row in found:  # row[0]: available_at before the lease; lease = deadline - timeout
        values = _values(name, partition, prefix, row[1:])
        deadline = values["available_at"] = values["lease_deadline"]
        values["client_id"] = client_id
        items.append(_record(Leased, values, fields_set))
        waited.append((deadline - row[0]).total_seconds() - timeout)
    return leases
