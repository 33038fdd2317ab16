"""The one boundary where database rows become querator records."""

from __future__ import annotations

import functools
import json
import operator
from collections import deque
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from itertools import repeat
from typing import Any, TypeVar

from pydantic import BaseModel

from querator.queue.backends.base import LeasedBatch, Leases, TableRefs
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
    prefix = id_prefix(queue.queue_id, partition)
    return _records(cls, _fields(queue.name, partition, prefix, [row]))[0]


def _fields(
    name: str, partition: int, prefix: str, found: Iterable[Row], client_id: str | None = None
) -> list[dict[str, Any]]:
    """The fields of item rows of ``name``'s ``partition``: rows of
    ``statements.ITEM_COLUMNS``, or with ``client_id`` rows of a lease
    (``statements.LEASED_COLUMNS`` after the lease order: ``available_at`` is the
    deadline and ``client_id`` the caller's). Ids are the ``prefix``
    (:func:`~querator.queue.ids.id_prefix`) + seq; headers arrive as JSON text
    and ``{}`` skips the parser."""
    leased = client_id is not None
    return [
        {
            "id": prefix + str(seq),
            "version": version,
            "queue": name,
            "partition": partition,
            "available_at": deadline if leased else available_at,
            "lease_deadline": deadline,
            "client_id": client_id if leased else holder,
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
        for (seq, version, available_at, deadline, holder, attempts, expire_at, payload, kind,
             encoding, reference, headers, dedup_key, source_id, created_at, priority) in found
    ]  # fmt: skip


def _records(cls: type[ItemT], fields: list[dict[str, Any]]) -> list[ItemT]:
    """``cls`` records holding ``fields`` (every field of each): built the way
    ``model_construct`` does (trusted values) without its per-field loop, when
    :func:`_plain_fields` says that is all it would do; the record's slots are
    set by C loops (``map``), no Python code per record."""
    fields_set = _plain_fields(cls)
    if fields_set is None:
        return [cls.model_construct(**values) for values in fields]
    n = len(fields)
    records = list(map(_new, repeat(cls, n)))
    _drain(map(_DICT.__set__, records, fields))
    _drain(map(_FIELDS_SET.__set__, records, repeat(fields_set, n)))
    _drain(map(_EXTRA.__set__, records, repeat(None, n)))
    _drain(map(_PRIVATE.__set__, records, repeat(None, n)))
    return records


_new = object.__new__
_SLOTS = ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__")
_DICT, _FIELDS_SET, _EXTRA, _PRIVATE = (BaseModel.__dict__[slot] for slot in _SLOTS)
"""The slots of a pydantic record (``BaseModel.__slots__``), set as
``model_construct`` sets them."""
_drain = deque[None](maxlen=0).extend
"""Runs an iterator to its end (its values are None)."""


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
    partition, counted, waiting, held, oldest_age, estimate, produced = row
    full = counted >= limit or waiting >= limit
    depth = counted if counted < limit else max(counted, round(estimate or 0))
    return PartitionGauges.model_construct(
        partition=partition,
        depth=depth,
        leased=held,
        scheduled=waiting - held,
        oldest_age=None if oldest_age is None else max(0.0, oldest_age),
        exact=not full,
        produced=produced,
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
    (``available_at`` before the lease, then :data:`~.statements.LEASED_COLUMNS`), as leased
    records in lease order (``by_priority``: higher priorities first) with how
    long each waited (sorts ``found`` in place). The records are a
    :class:`~.base.LeasedBatch`: completing them as they came names their rows
    without reading their ids."""
    if not found:
        return Leases([], [])
    found.sort(key=_priority_order if by_priority else _LEASE_ORDER)
    name, queue_id = queue.name, queue.queue_id
    prefix = id_prefix(queue_id, partition)
    items = _records(Leased, _fields(name, partition, prefix, map(_AFTER_ORDER, found), client_id))
    refs = TableRefs(name, queue_id, partition, list(map(_SEQ, found)), list(map(_VERSION, found)))
    # lease = deadline - timeout; waited: lease - available_at before the lease (the order)
    held = map(operator.sub, map(_DEADLINE, found), map(_ORDER, found))
    waits = map(timedelta.total_seconds, held)
    timeout = repeat(float(queue.settings.lease_timeout))
    return Leases(LeasedBatch(items, refs), list(map(float.__sub__, waits, timeout)))


_AFTER_ORDER = operator.itemgetter(slice(1, None))
_ORDER = operator.itemgetter(0)
_SEQ = operator.itemgetter(1 + ITEM_POSITION["seq"])
_VERSION = operator.itemgetter(1 + ITEM_POSITION["version"])
_DEADLINE = operator.itemgetter(1 + ITEM_POSITION["lease_deadline"])
"""Columns of a leased row: its ``available_at`` before the lease, then
:data:`~.statements.LEASED_COLUMNS`."""
