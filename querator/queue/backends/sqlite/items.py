"""Item operations on partition tables; each runs inside a :class:`Txn` it is handed.

An item is *leasable* when ``available_at <= now``, it has attempts left and
``expire_at > now``; it is *held* while ``lease_deadline > now``. The SQL text
lives in :mod:`.statements`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from querator.errors import Conflict, ConflictReason
from querator.queue.backends.base import InsertPlan, Kinds, Leases, NewItem
from querator.queue.backends.sqlite import statements as stmt
from querator.queue.backends.sqlite.rows import (
    ItemRow,
    Txn,
    dead_values,
    item_values,
    leased_item,
    seconds_us,
    stored_item,
)
from querator.queue.dead_reasons import sweep_reason
from querator.queue.ids import format_id, seqs_by_partition
from querator.queue.models import Leased, PartitionGauges, PartitionStats, QueueInfo, StoredItem
from querator.queue.validation import MAX_PRIORITY

__all__ = [
    "claim",
    "clear",
    "dead_letter",
    "dead_letter_due",
    "delete_items",
    "gauges",
    "lease",
    "list_items",
    "lookup",
    "next_available_at",
    "produce_items",
    "stats",
]


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
    qid = queue.queue_id
    keyed = {items[i].dedup_key: i for i in pending if items[i].dedup_key is not None}
    if keyed:
        query = stmt.seqs_by_dedup(qid, partition, len(keyed))
        for seq, key in txn.conn.execute(query, tuple(keyed)):
            ids[keyed[key]] = format_id(qid, partition, seq)
    fresh = [i for i in pending if ids[i] is None]
    insert = stmt.insert_item(qid, partition)
    expire = queue.settings.expire_timeout
    for index in fresh:
        seq = txn.conn.execute(insert, item_values(items[index], txn.now, expire)).lastrowid
        assert seq is not None  # set by every INSERT
        ids[index] = format_id(qid, partition, seq)
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


def lease(
    txn: Txn, queue: QueueInfo, partition: int, client_id: str, limit: int, kinds: Kinds = None
) -> Leases:
    """Lease up to ``limit`` leasable items of one partition (of ``kinds``): higher
    priorities first, then by ``(available_at, seq)``."""
    now = txn.now
    bound = stmt.attempts_bound(queue.settings.max_attempts)
    wanted = kinds or ()
    qid = queue.queue_id
    probe = stmt.priority_below(qid, partition)
    level = _next_level(txn, probe, MAX_PRIORITY + 1)
    if level is None:  # every item has priority 0: the lease of a queue without priorities
        query = stmt.leasable(qid, partition, len(wanted))
        rows = [ItemRow(*row) for row in txn.conn.execute(query, (now, now, bound, *wanted, limit))]
    else:
        rows = _by_priority(txn, qid, partition, (now, now, bound, *wanted), limit, level)
    leased = _lease_rows(txn, queue, partition, client_id, rows)
    return Leases(leased, [(now - row.available_at) / 1e6 for row in rows])


def _next_level(txn: Txn, probe: str, below: int) -> int | None:
    """The highest priority other than 0 below ``below`` that an item has."""
    row = txn.conn.execute(probe, (below,)).fetchone()
    return None if row is None else int(row[0])


def _by_priority(
    txn: Txn, qid: int, partition: int, params: tuple[Any, ...], limit: int, level: int | None
) -> list[ItemRow]:
    """Up to ``limit`` leasable rows, highest priority first, FIFO within one;
    ``level`` is the highest priority other than 0 an item has. Each such
    priority is one range of the priority index (its ready items, up to the
    first due later), so items scheduled for later cost nothing."""
    kinds = len(params) - 3
    at = stmt.leasable(qid, partition, kinds, "at")
    probe = stmt.priority_below(qid, partition)
    rows: list[ItemRow] = []
    zero_done = False
    while len(rows) < limit:
        if not zero_done and (level is None or level < 0):
            zero = stmt.leasable(qid, partition, kinds, "zero")
            rows += [ItemRow(*r) for r in txn.conn.execute(zero, (*params, limit - len(rows)))]
            zero_done = True
            continue
        if level is None:
            break
        found = txn.conn.execute(at, (*params, level, limit - len(rows)))
        rows += [ItemRow(*r) for r in found]
        level = _next_level(txn, probe, level)
    return rows


def claim(txn: Txn, queue: QueueInfo, ids: Sequence[str], client_id: str) -> list[Leased | None]:
    """Lease the just-produced ``ids`` that are leasable now; None for the others."""
    found: dict[str, Leased] = {}
    now = txn.now
    bound = stmt.attempts_bound(queue.settings.max_attempts)
    for partition, seqs in sorted(seqs_by_partition(ids).items()):
        wanted = sorted(set(seqs))
        query = stmt.leasable_seqs(queue.queue_id, partition, len(wanted))
        cursor = txn.conn.execute(query, (*wanted, now, now, bound))
        rows = [ItemRow(*row) for row in cursor]
        for item in _lease_rows(txn, queue, partition, client_id, rows):
            found[item.id] = item
    return [found.get(item_id) for item_id in ids]


def _lease_rows(
    txn: Txn, queue: QueueInfo, partition: int, client_id: str, rows: Sequence[ItemRow]
) -> list[Leased]:
    """Lease the selected ``rows`` of one partition (they are in this transaction's hands)."""
    if not rows:
        return []
    deadline = txn.now + seconds_us(queue.settings.lease_timeout)
    update = stmt.lease_update(queue.queue_id, partition, len(rows))
    params = (deadline, deadline, client_id, txn.now, *(row.seq for row in rows))
    txn.conn.execute(update, params)
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


def next_available_at(txn: Txn, queue: QueueInfo, kinds: Kinds = None) -> int | None:
    """Earliest ``available_at`` (microseconds) of an item not exhausted and not
    expired (of ``kinds``)."""
    earliest: int | None = None
    wanted = kinds or ()
    params = (txn.now, stmt.attempts_bound(queue.settings.max_attempts), *wanted)
    for partition in range(queue.settings.partitions):
        query = stmt.next_available(queue.queue_id, partition, len(wanted))
        row = txn.conn.execute(query, params).fetchone()
        if row is not None and (earliest is None or row[0] < earliest):
            earliest = row[0]
    return earliest


# -- dead-lettering -----------------------------------------------------------


def dead_letter(
    txn: Txn,
    queue: QueueInfo,
    partition: int,
    rows: Sequence[tuple[ItemRow, str]],
    dead: QueueInfo | None,
) -> None:
    """Move ``rows`` of one partition, each with why, into ``dead`` (or delete
    them when None)."""
    if not rows:
        return
    if dead is not None:
        insert = stmt.insert_item(dead.queue_id, partition % dead.settings.partitions)
        expire = dead.settings.dead_letter_expiry
        values = [
            dead_values(
                row,
                (queue.name, format_id(queue.queue_id, partition, row.seq)),
                txn.now,
                expire,
                why,
            )
            for row, why in rows
        ]
        txn.conn.executemany(insert, values)
        txn.wake.add(dead.name)
    delete = stmt.delete_seqs(queue.queue_id, partition, len(rows))
    txn.conn.execute(delete, tuple(row.seq for row, _ in rows))


def dead_letter_due(txn: Txn, queue: QueueInfo, dead: QueueInfo | None, limit: int) -> int:
    """Move up to ``limit`` unheld items that are exhausted or expired; returns how many.

    Unheld means due (``available_at <= now``): a lease keeps ``available_at``
    at its deadline, so an item under a live lease is never due.
    """
    moved = 0
    now = txn.now
    bound = stmt.attempts_bound(queue.settings.max_attempts)
    for partition in range(queue.settings.partitions):
        if moved >= limit:
            break
        query = stmt.dead_due(queue.queue_id, partition)
        cursor = txn.conn.execute(query, (now, bound, limit - moved))
        rows = sorted((ItemRow(*row) for row in cursor), key=lambda row: row.seq)
        whys = [(row, sweep_reason(row.attempts, queue.settings.max_attempts)) for row in rows]
        dead_letter(txn, queue, partition, whys, dead)
        moved += len(rows)
    return moved


# -- inspection and deletion --------------------------------------------------


def gauges(txn: Txn, queue: QueueInfo, limit: int) -> list[PartitionGauges]:
    """Bounded probes per partition (see :func:`.statements.gauges`): past ``limit``
    items the depth is the span of seqs, an upper bound (exact while items leave
    in the order they came)."""
    now = txn.now
    bound = stmt.attempts_bound(queue.settings.max_attempts)
    result: list[PartitionGauges] = []
    for partition in range(queue.settings.partitions):
        query = stmt.gauges(queue.queue_id, partition)
        row = txn.conn.execute(query, (limit, now, limit, now, now, bound)).fetchone()
        counted, span, waiting, held, head, produced = row
        full = counted >= limit or waiting >= limit
        result.append(
            PartitionGauges.model_construct(
                partition=partition,
                depth=counted if counted < limit else max(counted, span or 0),
                leased=held,
                scheduled=waiting - held,
                oldest_age=None if head is None else max(0.0, (now - head) / 1e6),
                exact=not full,
                produced=produced,
            )
        )
    return result


def stats(txn: Txn, queue: QueueInfo) -> list[PartitionStats]:
    """Counts per partition at the transaction's instant."""
    now = txn.now
    result: list[PartitionStats] = []
    for partition in range(queue.settings.partitions):
        query = stmt.stats(queue.queue_id, partition)
        total, leased, waiting, dead, oldest = txn.conn.execute(query, (now, now)).fetchone()
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
    query = stmt.list_items(queue.queue_id, partition, pivot_seq is not None, scheduled_only)
    params = [*([] if pivot_seq is None else [pivot_seq]), *([txn.now] if scheduled_only else [])]
    rows = txn.conn.execute(query, (*params, limit))
    return [stored_item(queue, partition, ItemRow(*row)) for row in rows]


def lookup(txn: Txn, queue: QueueInfo, dedup_keys: Sequence[str]) -> list[StoredItem]:
    """The items (in any partition) holding any of ``dedup_keys``."""
    keys = tuple(dedup_keys)
    if not keys:
        return []
    found = []
    for partition in range(queue.settings.partitions):
        query = stmt.select_dedup(queue.queue_id, partition, len(keys))
        rows = txn.conn.execute(query, keys)
        found += [stored_item(queue, partition, ItemRow(*row)) for row in rows]
    return found


def scan_keys(
    txn: Txn, queue: QueueInfo, low: str, include_low: bool, high: str | None, limit: int
) -> list[StoredItem]:
    """Up to ``limit`` items by dedup key in the range, merged over the partitions."""
    found: list[StoredItem] = []
    for partition in range(queue.settings.partitions):
        query = stmt.scan_keys(queue.queue_id, partition, include_low, high is not None)
        params = (low, high, limit) if high is not None else (low, limit)
        rows = txn.conn.execute(query, params)
        found += [stored_item(queue, partition, ItemRow(*row)) for row in rows]
    found.sort(key=lambda item: item.dedup_key or "")
    return found[:limit]


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
        query = stmt.select_seqs(queue.queue_id, partition, len(by_seq))
        present = {row[0] for row in txn.conn.execute(query, tuple(by_seq))}
        missing.update({i: ConflictReason.MISSING for s, i in by_seq.items() if s not in present})
    if missing:
        raise Conflict(missing)
    for partition, by_seq in wanted.items():
        txn.conn.execute(stmt.delete_seqs(queue.queue_id, partition, len(by_seq)), tuple(by_seq))


def clear(txn: Txn, queue: QueueInfo, destructive: bool) -> int:
    """Delete every unheld item (every item when ``destructive``); returns how many."""
    removed = 0
    params = () if destructive else (txn.now,)
    for partition in range(queue.settings.partitions):
        query = stmt.clear(queue.queue_id, partition, destructive)
        removed += txn.conn.execute(query, params).rowcount
    return removed
