"""The all-or-nothing transaction: check every key, then apply completes,
deletes, retries, renews, produces.

Checks run first and collect every failure, so a Conflict names each
offending id and nothing is changed. The whole database is locked by
``BEGIN IMMEDIATE``, so no row can change between check and apply.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from querator.errors import Conflict, ConflictReason
from querator.queue.backends.base import ItemKey, RenewOp, RetryOp, TxnPlan
from querator.queue.backends.sqlite import statements as stmt
from querator.queue.backends.sqlite.engine import is_missing_table
from querator.queue.backends.sqlite.items import claim, dead_letter, produce_items
from querator.queue.backends.sqlite.rows import ItemRow, Txn, leased_item, seconds_us, to_us
from querator.queue.dead_reasons import retry_reason
from querator.queue.models import Leased, QueueInfo, TransactResult

__all__ = ["transact"]


def _fetch(txn: Txn, plan: TxnPlan, keys: Iterable[ItemKey]) -> dict[str, ItemRow]:
    """The current rows of ``keys`` that exist, by item id.

    A partition table that does not exist (its queue was dropped) holds none.
    """
    groups: dict[tuple[int, int], dict[int, str]] = {}
    for key in sorted(keys, key=lambda k: k.lock_order):
        queue = plan.queues.get(key.queue)
        if queue is None or queue.queue_id != key.queue_id:
            continue
        if not 0 <= key.partition < queue.settings.partitions:
            continue
        groups.setdefault((key.queue_id, key.partition), {})[key.seq] = key.id
    rows: dict[str, ItemRow] = {}
    for (queue_id, partition), by_seq in groups.items():
        query = stmt.select_seqs(queue_id, partition, len(by_seq))
        try:
            cursor = txn.conn.execute(query, tuple(by_seq))
        except sqlite3.OperationalError as exc:
            if is_missing_table(exc):
                continue
            raise
        for values in cursor:
            row = ItemRow(*values)
            rows[by_seq[row.seq]] = row
    return rows


def _check(txn: Txn, plan: TxnPlan) -> dict[str, ItemRow]:
    """The rows of every key in the plan, or Conflict naming every failed check."""
    held = [*plan.complete, *(op.key for op in plan.retry), *(op.key for op in plan.renew)]
    rows = _fetch(txn, plan, [*held, *plan.depends, *plan.delete])
    failures: dict[str, ConflictReason] = {}
    for key in held:
        reason = _reason(rows.get(key.id), key, txn.now, need_lease=True)
        if reason is not None:
            failures[key.id] = reason
    for key in [*plan.depends, *plan.delete]:
        reason = _reason(rows.get(key.id), key, txn.now, need_lease=False)
        if reason is not None:
            failures[key.id] = reason
    for key in plan.delete:
        row = rows.get(key.id)
        if key.id not in failures and row is not None and _held(row, txn.now):
            failures[key.id] = ConflictReason.LEASED
    if failures:
        raise Conflict(failures)
    return rows


def _reason(row: ItemRow | None, key: ItemKey, now: int, need_lease: bool) -> ConflictReason | None:
    if row is None:
        return ConflictReason.MISSING
    if row.version != key.version:
        return ConflictReason.STALE
    if need_lease and not _held(row, now):
        return ConflictReason.NOT_LEASED
    return None


def _held(row: ItemRow, now: int) -> bool:
    """Whether a live lease holds the row."""
    return row.lease_deadline is not None and row.lease_deadline > now


def _delete(txn: Txn, keys: Sequence[ItemKey]) -> None:
    for key in keys:
        txn.conn.execute(stmt.complete(key.queue_id, key.partition), (key.seq,))


def _complete(txn: Txn, keys: Sequence[ItemKey]) -> dict[str, list[float]]:
    """Delete completed items; how long each had been leased, per queue."""
    held_for: dict[str, list[float]] = {}
    for key in keys:
        statement = stmt.complete_held(key.queue_id, key.partition)
        row = txn.conn.execute(statement, (key.seq,)).fetchone()
        if row is not None and row[0] is not None:
            held_for.setdefault(key.queue, []).append((txn.now - row[0]) / 1_000_000)
    return held_for


def _retry(txn: Txn, plan: TxnPlan, op: RetryOp, row: ItemRow) -> None:
    key = op.key
    queue = plan.queues[key.queue]
    max_attempts = queue.settings.max_attempts
    if op.dead or (max_attempts and row.attempts >= max_attempts):
        dead = _dead_queue(plan, queue)
        why = retry_reason(op.reason, op.dead, max_attempts)
        dead_letter(txn, queue, key.partition, [(row, why)], dead)
        return
    available = txn.now if op.retry_at is None else to_us(op.retry_at)
    txn.conn.execute(stmt.retry(key.queue_id, key.partition), (available, key.seq))
    if available <= txn.now:
        txn.wake.add(queue.name)


def _dead_queue(plan: TxnPlan, queue: QueueInfo) -> QueueInfo | None:
    name = queue.settings.dead_queue
    return None if name is None else plan.queues.get(name)


def _renew(txn: Txn, plan: TxnPlan, op: RenewOp, row: ItemRow) -> Leased:
    key = op.key
    deadline = txn.now + seconds_us(op.extend)
    txn.conn.execute(stmt.renew(key.queue_id, key.partition), (deadline, deadline, key.seq))
    changes = {"version": row.version + 1, "lease_deadline": deadline, "available_at": deadline}
    return leased_item(plan.queues[key.queue], key.partition, row, changes)


def transact(txn: Txn, plan: TxnPlan) -> TransactResult:
    """Apply ``plan`` in the open transaction, or raise Conflict having changed nothing."""
    rows = _check(txn, plan)
    held_for = _complete(txn, plan.complete)
    _delete(txn, plan.delete)
    for retry in plan.retry:
        _retry(txn, plan, retry, rows[retry.key.id])
    renewed = [_renew(txn, plan, op, rows[op.key.id]) for op in plan.renew]
    produced: dict[str, list[str]] = {}
    for name, items in plan.produce:
        ids = produce_items(txn, plan.queues[name], items)
        produced.setdefault(name, []).extend(ids)
    leased: dict[str, list[Leased | None]] = {}
    for name, items in plan.claim:
        assert plan.client_id is not None
        ids = produce_items(txn, plan.queues[name], items)
        leased.setdefault(name, []).extend(claim(txn, plan.queues[name], ids, plan.client_id))
    txn.wake -= plan.silent
    txn.wake |= plan.wake
    return TransactResult.model_construct(
        produced=produced, renewed=renewed, leased=leased, found={}, held_for=held_for
    )
