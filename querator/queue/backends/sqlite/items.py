"""Item operations on partition tables; each runs inside a :class:`Txn` it is handed.

An item is *leasable* when ``available_at <= now``, it has attempts left and
``expire_at > now``; it is *held* while ``lease_deadline > now``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Row,
    Table,
    and_,
    case,
    delete,
    func,
    insert,
    or_,
    select,
    true,
    update,
)

from querator.errors import Conflict, ConflictReason
from querator.queue.backends.base import InsertPlan, NewItem
from querator.queue.backends.sqlite.rows import (
    Txn,
    dead_values,
    item_values,
    leased_item,
    seconds_us,
    stored_item,
)
from querator.queue.backends.sqlite.schema import partition_table
from querator.queue.ids import format_id, seqs_by_partition
from querator.queue.models import Leased, PartitionStats, QueueInfo, StoredItem

__all__ = [
    "clear",
    "dead_letter",
    "dead_letter_due",
    "delete_items",
    "lease",
    "list_items",
    "next_available_at",
    "produce_items",
    "stats",
]


def _tables(queue: QueueInfo) -> list[tuple[int, Table]]:
    qid = queue.queue_id
    return [(p, partition_table(qid, p)) for p in range(queue.settings.partitions)]


def _held(t: Table, now: int) -> ColumnElement[bool]:
    return and_(t.c.lease_deadline.is_not(None), t.c.lease_deadline > now)


def _unheld(t: Table, now: int) -> ColumnElement[bool]:
    return or_(t.c.lease_deadline.is_(None), t.c.lease_deadline <= now)


def _has_attempts(t: Table, max_attempts: int) -> ColumnElement[bool]:
    return t.c.attempts < max_attempts if max_attempts else true()


# -- produce ------------------------------------------------------------------


def _insert_partition(
    txn: Txn,
    queue: QueueInfo,
    partition: int,
    items: Sequence[NewItem],
    pending: Sequence[int],
    ids: list[str | None],
) -> int:
    """Insert ``items[i] for i in pending`` into one partition, filling ``ids``.

    An item whose dedup key an item of the partition holds gets that item's id
    instead. Returns how many rows were inserted.
    """
    t = partition_table(queue.queue_id, partition)
    keyed = {items[i].dedup_key: i for i in pending if items[i].dedup_key is not None}
    if keyed:
        query = select(t.c.seq, t.c.dedup_key).where(t.c.dedup_key.in_(list(keyed)))
        for seq, key in txn.conn.execute(query):
            ids[keyed[key]] = format_id(queue.queue_id, partition, seq)
    fresh = [i for i in pending if ids[i] is None]
    if not fresh:
        return 0
    expire = queue.settings.expire_timeout
    rows = [item_values(items[i], txn.now, expire) for i in fresh]
    stmt = insert(t).returning(t.c.seq, sort_by_parameter_order=True)
    seqs = txn.conn.execute(stmt, rows).scalars().all()
    for index, seq in zip(fresh, seqs, strict=True):
        ids[index] = format_id(queue.queue_id, partition, seq)
    return len(fresh)


def produce_items(txn: Txn, queue: QueueInfo, items: Sequence[NewItem]) -> list[str]:
    """Insert items into their partitions; returns ids in input order.

    A dedup key held by an item of the partition returns that item's id; a key
    repeated within ``items`` maps to its first occurrence's id.
    """
    ids: list[str | None] = [None] * len(items)
    plan = InsertPlan.of(items)
    inserted = 0
    for partition, pending in sorted(plan.by_partition.items()):
        inserted += _insert_partition(txn, queue, partition, items, pending, ids)
    if inserted:
        txn.wake.add(queue.name)
    return plan.ids_in_order(ids)


# -- lease --------------------------------------------------------------------


def lease(txn: Txn, queue: QueueInfo, partition: int, client_id: str, limit: int) -> list[Leased]:
    """Lease up to ``limit`` leasable items of one partition, by ``(available_at, seq)``."""
    t = partition_table(queue.queue_id, partition)
    now = txn.now
    query = (
        select(t)
        .where(t.c.available_at <= now, t.c.expire_at > now)
        .where(_has_attempts(t, queue.settings.max_attempts))
        .order_by(t.c.available_at, t.c.seq)
        .limit(limit)
    )
    return _lease_rows(txn, queue, partition, client_id, txn.conn.execute(query).all())


def claim(txn: Txn, queue: QueueInfo, ids: Sequence[str], client_id: str) -> list[Leased | None]:
    """Lease the just-produced ``ids`` that are leasable now; None for the others."""
    by_partition = seqs_by_partition(ids)
    found: dict[str, Leased] = {}
    now = txn.now
    for partition, seqs in sorted(by_partition.items()):
        t = partition_table(queue.queue_id, partition)
        query = (
            select(t)
            .where(t.c.seq.in_(sorted(set(seqs))), t.c.available_at <= now, t.c.expire_at > now)
            .where(_has_attempts(t, queue.settings.max_attempts))
        )
        rows = txn.conn.execute(query).all()
        for item in _lease_rows(txn, queue, partition, client_id, rows):
            found[item.id] = item
    return [found.get(item_id) for item_id in ids]


def _lease_rows(
    txn: Txn, queue: QueueInfo, partition: int, client_id: str, rows: Sequence[Row[Any]]
) -> list[Leased]:
    """Lease the selected ``rows`` of one partition (they are in this transaction's hands)."""
    if not rows:
        return []
    t = partition_table(queue.queue_id, partition)
    now = txn.now
    deadline = now + seconds_us(queue.settings.lease_timeout)
    txn.conn.execute(
        update(t)
        .where(t.c.seq.in_([row.seq for row in rows]))
        .values(
            available_at=deadline,
            lease_deadline=deadline,
            client_id=client_id,
            attempts=t.c.attempts + 1,
            version=t.c.version + 1,
        )
    )
    return [
        leased_item(
            queue,
            partition,
            row,
            {
                "available_at": deadline,
                "lease_deadline": deadline,
                "client_id": client_id,
                "attempts": row.attempts + 1,
                "version": row.version + 1,
            },
        )
        for row in rows
    ]


def next_available_at(txn: Txn, queue: QueueInfo) -> int | None:
    """Earliest ``available_at`` (microseconds) of an item not exhausted and not expired."""
    earliest: int | None = None
    for _, t in _tables(queue):
        query = (
            select(t.c.available_at)
            .where(t.c.expire_at > txn.now, _has_attempts(t, queue.settings.max_attempts))
            .order_by(t.c.available_at)
            .limit(1)
        )
        found = txn.conn.execute(query).scalar()
        if found is not None and (earliest is None or found < earliest):
            earliest = found
    return earliest


# -- dead-lettering -----------------------------------------------------------


def dead_letter(
    txn: Txn, queue: QueueInfo, partition: int, rows: Sequence[Row[Any]], dead: QueueInfo | None
) -> None:
    """Move ``rows`` of one partition into ``dead`` (or delete them when None)."""
    if not rows:
        return
    if dead is not None:
        target = partition_table(dead.queue_id, partition % dead.settings.partitions)
        expire = dead.settings.expire_timeout
        values = [
            dead_values(row, format_id(queue.queue_id, partition, row.seq), txn.now, expire)
            for row in rows
        ]
        txn.conn.execute(insert(target), values)
        txn.wake.add(dead.name)
    t = partition_table(queue.queue_id, partition)
    txn.conn.execute(delete(t).where(t.c.seq.in_([row.seq for row in rows])))


def dead_letter_due(txn: Txn, queue: QueueInfo, dead: QueueInfo | None, limit: int) -> int:
    """Move up to ``limit`` unheld items that are exhausted or expired; returns how many.

    Unheld means due (``available_at <= now``): a lease keeps ``available_at``
    at its deadline, so an item under a live lease is never due.
    """
    moved = 0
    max_attempts = queue.settings.max_attempts
    for partition, t in _tables(queue):
        if moved >= limit:
            break
        spent = t.c.expire_at <= txn.now
        if max_attempts:
            spent = or_(spent, t.c.attempts >= max_attempts)
        query = (
            select(t)
            .where(t.c.available_at <= txn.now, spent)
            .order_by(t.c.available_at, t.c.seq)
            .limit(limit - moved)
        )
        rows = txn.conn.execute(query).all()
        dead_letter(txn, queue, partition, sorted(rows, key=lambda row: row.seq), dead)
        moved += len(rows)
    return moved


# -- inspection and deletion --------------------------------------------------


def stats(txn: Txn, queue: QueueInfo) -> list[PartitionStats]:
    """Counts per partition at the transaction's instant."""
    now = txn.now
    result: list[PartitionStats] = []
    for partition, t in _tables(queue):
        scheduled = and_(t.c.available_at > now, t.c.lease_deadline.is_(None))
        query = select(
            func.count(),
            func.coalesce(func.sum(case((_held(t, now), 1), else_=0)), 0),
            func.coalesce(func.sum(case((scheduled, 1), else_=0)), 0),
            func.count(t.c.source_id),
            func.min(t.c.created_at),
        )
        total, leased, waiting, dead, oldest = txn.conn.execute(query).one()
        result.append(
            PartitionStats.model_construct(
                partition=partition,
                total=total,
                leased=leased,
                scheduled=waiting,
                dead_lettered=dead,
                oldest_age=None if oldest is None else max(0, now - oldest) / 1_000_000,
            )
        )
    return result


def list_items(
    txn: Txn,
    queue: QueueInfo,
    partition: int,
    pivot_seq: int | None,
    limit: int,
    scheduled_only: bool,
) -> list[StoredItem]:
    """Items of one partition with ``seq >= pivot_seq``, by seq."""
    t = partition_table(queue.queue_id, partition)
    query = select(t).order_by(t.c.seq).limit(limit)
    if pivot_seq is not None:
        query = query.where(t.c.seq >= pivot_seq)
    if scheduled_only:
        query = query.where(t.c.available_at > txn.now, t.c.lease_deadline.is_(None))
    return [stored_item(queue, partition, row) for row in txn.conn.execute(query)]


def lookup(txn: Txn, queue: QueueInfo, dedup_keys: Sequence[str]) -> list[StoredItem]:
    """The items (in any partition) holding any of ``dedup_keys``."""
    found = []
    for partition in range(queue.settings.partitions):
        t = partition_table(queue.queue_id, partition)
        query = select(t).where(t.c.dedup_key.in_(list(dedup_keys)))
        found += [stored_item(queue, partition, row) for row in txn.conn.execute(query)]
    return found


def delete_items(txn: Txn, queue: QueueInfo, keys: Sequence[tuple[str, int, int]]) -> None:
    """Delete ``(id, partition, seq)`` items, or raise Conflict (MISSING) naming absent ones."""
    wanted: dict[int, dict[int, str]] = {}
    missing: dict[str, ConflictReason] = {}
    for item_id, partition, seq in keys:
        if 0 <= partition < queue.settings.partitions:
            wanted.setdefault(partition, {})[seq] = item_id
        else:
            missing[item_id] = ConflictReason.MISSING
    for partition, by_seq in wanted.items():
        t = partition_table(queue.queue_id, partition)
        present = set(txn.conn.execute(select(t.c.seq).where(t.c.seq.in_(by_seq))).scalars())
        missing.update({i: ConflictReason.MISSING for s, i in by_seq.items() if s not in present})
    if missing:
        raise Conflict(missing)
    for partition, by_seq in wanted.items():
        t = partition_table(queue.queue_id, partition)
        txn.conn.execute(delete(t).where(t.c.seq.in_(by_seq)))


def clear(txn: Txn, queue: QueueInfo, destructive: bool) -> int:
    """Delete every unheld item (every item when ``destructive``); returns how many."""
    removed = 0
    for _, t in _tables(queue):
        stmt = delete(t) if destructive else delete(t).where(_unheld(t, txn.now))
        removed += txn.conn.execute(stmt).rowcount
    return removed
