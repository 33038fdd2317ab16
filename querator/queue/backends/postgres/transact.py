"""``Backend.transact`` on PostgreSQL: lock in order, check everything, then apply."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, NamedTuple, TypeVar

import psycopg

from querator.errors import Conflict, ConflictReason, QueueNotFound
from querator.queue.backends.base import ItemKey, RetryOp, TableRefs, TxnPlan
from querator.queue.backends.postgres import rows
from querator.queue.backends.postgres import statements as stmt
from querator.queue.backends.postgres.array_params import int_array, text_array
from querator.queue.backends.postgres.failures import driver_errors
from querator.queue.backends.postgres.items import (
    Conn,
    LeaseOnInsert,
    dead_letter,
    insert_items,
    notify,
)
from querator.queue.dead_reasons import retry_reason
from querator.queue.ids import seqs_by_partition
from querator.queue.models import Leased, QueueInfo, TransactResult

T = TypeVar("T")
TableKey = tuple[int, int]
"""(queue_id, partition): one item table."""


class Locked(NamedTuple):
    """The state of a locked item that the checks need."""

    version: int
    held: bool
    attempts: int
    held_for: float | None
    """Seconds since its lease began (None: not leased, or leased before the
    store recorded when). Read here, not in the delete's RETURNING: Citus
    refuses a non-immutable function there."""


def one_table_complete(plan: TxnPlan) -> bool:
    """True when ``plan`` only completes items of one partition of one queue.

    Such a plan, the common ``complete(batch)``, can run as one statement
    (:func:`complete_at_once`) instead of a locking transaction.
    """
    if plan.produce or plan.claim or not completes_only(plan):
        return False
    return len({(key.queue_id, key.partition) for key in plan.complete}) == 1


async def complete_at_once(
    conn: Conn, names: stmt.Names, plan: TxnPlan, now: datetime | None
) -> TransactResult | None:
    """Run a :func:`one_table_complete` plan as one autocommit statement; its
    result carries how long the items had been leased.

    Returns None when some check failed; then nothing changed and
    :func:`run_transact` reports the reasons.
    """
    try:
        took = await _complete_checked(conn, names, list(plan.complete), now)
    except ChecksFailed:
        return None
    return TransactResult.model_construct(
        produced={}, renewed=[], leased={}, found={}, held_for={plan.complete[0].queue: took}
    )


class ChecksFailed(Exception):
    """A check riding on a statement failed (:func:`run_transact` with ``checked``):
    the transaction must roll back, and the locking path names the reasons."""


def completes_only(plan: TxnPlan) -> bool:
    """True when the only items ``plan`` checks are the ones it completes: their
    checks can ride on the deletes (``run_transact(..., checked=True)``)."""
    if plan.retry or plan.renew or plan.depends or plan.delete or not plan.complete:
        return False
    tables = {(key.queue, key.queue_id, key.partition) for key in plan.complete}
    return all(_addresses(plan, *table) for table in tables)


async def run_transact(
    conn: Conn, names: stmt.Names, plan: TxnPlan, *, now: datetime | None, checked: bool = False
) -> TransactResult:
    """Apply ``plan`` inside the caller's open transaction, or raise Conflict.

    ``checked`` (for a :func:`completes_only` plan): delete each table's items
    with one statement that checks versions and leases itself, instead of
    locking and checking first; a failed check raises :class:`ChecksFailed`.
    ``now`` is the client clock's instant (None: the database's).
    """
    wake: set[str] = set()
    held_for: dict[str, list[float]] = {}
    if checked:
        locked: dict[str, Locked] = {}
        for keys in _by_table(plan.complete, lambda key: key).values():
            took = await _complete_checked(conn, names, keys, now)
            held_for.setdefault(keys[0].queue, []).extend(took)
    else:
        locked = await _lock_and_check(conn, names, plan, now)
        for (queue_id, partition), keys in _by_table(plan.complete, lambda key: key).items():
            with driver_errors(keys[0].queue):
                table = names.partition(queue_id, partition)
                await conn.execute(stmt.DELETE_SEQS.format(table=table), {"seqs": _seqs(keys)})
            seconds = (locked[key.id].held_for for key in keys)
            held_for.setdefault(keys[0].queue, []).extend(s for s in seconds if s is not None)
        for (queue_id, partition), keys in _by_table(plan.delete, lambda key: key).items():
            with driver_errors(keys[0].queue):
                table = names.partition(queue_id, partition)
                await conn.execute(stmt.DELETE_SEQS.format(table=table), {"seqs": _seqs(keys)})
    await _retry(conn, names, plan, locked, wake, now)
    renewed = await _renew(conn, names, plan, now)
    produced: dict[str, list[str]] = {}
    for name, items in plan.produce:
        info = _queue_of(plan, name)
        with driver_errors(name):
            ids = await insert_items(
                conn, names, info, items, now=now, notify=name not in plan.silent
            )
            produced.setdefault(name, []).extend(ids)
    leased: dict[str, list[Leased | None]] = {}
    for name, items in plan.claim:
        info = _queue_of(plan, name)
        assert plan.client_id is not None
        with driver_errors(name):
            fresh: dict[str, Leased] = {}
            lease = LeaseOnInsert(plan.client_id, fresh)
            ids = await insert_items(conn, names, info, items, now=now, notify=False, lease=lease)
            held = [item_id for item_id in dict.fromkeys(ids) if item_id not in fresh]
            if held:  # dedup hits (and items scheduled later): lease what is leasable
                claimed = await claim_ids(conn, names, info, held, plan.client_id, now)
                for item_id, item in zip(held, claimed, strict=True):
                    if item is not None:
                        fresh[item_id] = item
            found = [fresh.get(item_id) for item_id in ids]
        leased.setdefault(name, []).extend(found)
        if None in found:
            wake.add(name)
    await notify(conn, names, (wake - plan.silent) | plan.wake)
    return TransactResult.model_construct(
        produced=produced, renewed=renewed, leased=leased, found={}, held_for=held_for
    )


def _queue_of(plan: TxnPlan, name: str) -> QueueInfo:
    """The info of a queue the plan produces into; QueueNotFound if it is gone."""
    info = plan.queues.get(name)
    if info is None:
        raise QueueNotFound(name)
    return info


async def claim_ids(
    conn: Conn,
    names: stmt.Names,
    queue: QueueInfo,
    ids: list[str],
    client_id: str,
    now: datetime | None,
) -> list[Leased | None]:
    """Lease the just-produced ``ids`` that are leasable now; None for the others."""
    by_partition = seqs_by_partition(ids)
    found: dict[str, Leased] = {}
    for partition, seqs in sorted(by_partition.items()):
        table = names.partition(queue.queue_id, partition)
        params = {
            "seqs": int_array(sorted(set(seqs))),
            "lease_timeout": float(queue.settings.lease_timeout),
            "client_id": client_id,
            "max_attempts": queue.settings.max_attempts,
            "now": now,
        }
        cur = await conn.execute(stmt.CLAIM.format(table=table, columns=stmt.ITEM_COLUMNS), params)
        for row in await cur.fetchall():
            item = rows.item(Leased, queue, partition, row)
            found[item.id] = item
    return [found.get(item_id) for item_id in ids]


async def _complete_checked(
    conn: Conn, names: stmt.Names, keys: list[ItemKey], now: datetime | None
) -> list[float]:
    """Delete held items of one table at their versions, all or :class:`ChecksFailed`;
    returns how long they had been leased (those whose lease start is known)."""
    statement, args = complete_call(names, keys, now)
    return await _run_checked(conn, keys[0].queue, statement, args)


async def complete_table(
    conn: Conn, names: stmt.Names, refs: TableRefs, now: datetime | None
) -> bool:
    """Run :func:`table_complete_call` on ``conn``; False when a check failed
    (nothing changed)."""
    statement, args = table_complete_call(names, refs, now)
    try:
        await _run_checked(conn, refs.queue, statement, args)
    except ChecksFailed:
        return False
    return True


async def _run_checked(
    conn: Conn, queue: str, statement: bytes, args: dict[str, Any]
) -> list[float]:
    """Run a self-checking complete; a failed check raises :class:`ChecksFailed`.
    Returns how long the items had been leased (those whose lease start is known)."""
    with driver_errors(queue):
        try:
            cur = await conn.execute(statement, args)
        except psycopg.Error as exc:
            if failed_check(exc):
                raise ChecksFailed from exc
            raise
        row = await cur.fetchone()
    return list(row[1] or ()) if row is not None else []


def complete_call(
    names: stmt.Names, keys: list[ItemKey], now: datetime | None
) -> tuple[bytes, dict[str, Any]]:
    """:func:`table_complete_call` for the keys of one table."""
    return table_complete_call(names, table_refs(keys), now)


def table_refs(keys: Sequence[ItemKey]) -> TableRefs:
    """The keys of items of one table (the first key's) as :class:`TableRefs`."""
    first = keys[0]
    return TableRefs(
        first.queue,
        first.queue_id,
        first.partition,
        [key.seq for key in keys],
        [key.version for key in keys],
    )


async def run_self_checked(
    conn: Conn,
    queue: str,
    statement: bytes,
    args: dict[str, Any],
    *,
    fetch: bool = False,
    binary: bool = False,
) -> list[Any] | None:
    """Run a self-checking autocommit statement: the rows it returned (none
    unless ``fetch``; in binary with ``binary``), or None when a check failed
    (nothing changed)."""
    with driver_errors(queue):
        try:
            cur = await conn.execute(statement, args, binary=binary)
            return await cur.fetchall() if fetch else []
        except psycopg.Error as exc:
            if failed_check(exc):
                return None
            raise


def table_complete_call(
    names: stmt.Names, refs: TableRefs, now: datetime | None
) -> tuple[bytes, dict[str, Any]]:
    """The statement and parameters that delete held items of one table at their
    versions, in seq order (sans I/O: the sync shell, :mod:`.sync_calls`, runs
    them too); a failed check raises an error :func:`failed_check` recognizes."""
    seqs, versions = in_seq_order(refs)
    args = {
        "seqs": int_array(seqs),
        "versions": int_array(versions),
        "count": len(seqs),
        "now": now,
    }
    return stmt.complete_for(names, refs.queue_id, refs.partition), args


def in_seq_order(refs: TableRefs) -> tuple[list[int], list[int]]:
    """``refs``' seqs and versions sorted by seq (the order rows are locked in)."""
    seqs, versions = refs.seqs, refs.versions
    if seqs == sorted(seqs):  # seqs are unique
        return seqs, versions
    pairs = sorted(zip(seqs, versions, strict=True))
    return [seq for seq, _ in pairs], [version for _, version in pairs]


def failed_check(exc: psycopg.Error) -> bool:
    """Whether ``exc`` says a self-checking statement's check failed (nothing changed)."""
    return exc.sqlstate in (stmt.CHECK_FAILED_STATE, DEADLOCK_STATE)


DEADLOCK_STATE = "40P01"
"""deadlock_detected: the locking path, which locks in one order, cannot meet it."""


async def _lock_and_check(
    conn: Conn, names: stmt.Names, plan: TxnPlan, now: datetime | None
) -> dict[str, Locked]:
    """Lock every referenced row in ``ItemKey.lock_order``; raise Conflict listing failures."""
    checks = [(key, True) for key in plan.complete]
    checks += [(op.key, True) for op in plan.retry]
    checks += [(op.key, True) for op in plan.renew]
    checks += [(key, False) for key in [*plan.depends, *plan.delete]]
    failures: dict[str, ConflictReason] = {}
    valid = [key for key, _ in checks if addresses_plan_queue(key, plan)]
    locked: dict[str, Locked] = {}
    for (queue_id, partition), keys in _by_table(valid, lambda key: key).items():
        with driver_errors(keys[0].queue):
            table = names.partition(queue_id, partition)
            args = {"seqs": _seqs(keys), "now": now}
            cur = await conn.execute(stmt.LOCK_ITEMS.format(table=table), args)
            found = {row[0]: Locked(*row[1:]) for row in await cur.fetchall()}
        for key in keys:
            if key.seq in found:
                locked[key.id] = found[key.seq]
    for key, needs_lease in checks:
        row = locked.get(key.id)
        if row is None:
            failures[key.id] = ConflictReason.MISSING
        elif row.version != key.version:
            failures[key.id] = ConflictReason.STALE
        elif needs_lease and not row.held:
            failures[key.id] = ConflictReason.NOT_LEASED
    for key in plan.delete:
        row = locked.get(key.id)
        if key.id not in failures and row is not None and row.held:
            failures[key.id] = ConflictReason.LEASED
    if failures:
        raise Conflict(failures)
    return locked


def addresses_plan_queue(key: ItemKey, plan: TxnPlan) -> bool:
    """False when the key cannot name an item of its queue (recreated queue, bad partition)."""
    return _addresses(plan, key.queue, key.queue_id, key.partition)


def _addresses(plan: TxnPlan, queue: str, queue_id: int, partition: int) -> bool:
    info = plan.queues.get(queue)
    return (
        info is not None and info.queue_id == queue_id and 0 <= partition < info.settings.partitions
    )


def _by_table(entries: Iterable[T], key_of: Callable[[T], ItemKey]) -> dict[TableKey, list[T]]:
    """Entries grouped per item table, tables and entries in lock order."""
    ordered = sorted(entries, key=lambda entry: key_of(entry).lock_order)
    groups: dict[TableKey, list[T]] = {}
    for entry in ordered:
        key = key_of(entry)
        groups.setdefault((key.queue_id, key.partition), []).append(entry)
    return groups


def _seqs(keys: Iterable[ItemKey]) -> str:
    return int_array(key.seq for key in keys)


async def _retry(
    conn: Conn,
    names: stmt.Names,
    plan: TxnPlan,
    locked: dict[str, Locked],
    wake: set[str],
    now: datetime | None,
) -> None:
    """Release retried items, or dead-letter those marked dead or out of attempts."""
    for (queue_id, partition), ops in _by_table(plan.retry, lambda op: op.key).items():
        info = plan.queues[ops[0].key.queue]
        limit = info.settings.max_attempts
        dead_ops: list[RetryOp] = []
        again: list[RetryOp] = []
        for op in ops:
            spent = limit > 0 and locked[op.key.id].attempts >= limit
            (dead_ops if op.dead or spent else again).append(op)
        if again:
            with driver_errors(info.name):
                args = {
                    "seqs": int_array(op.key.seq for op in again),
                    "retry_at": [op.retry_at for op in again],
                    "now": now,
                }
                table = names.partition(queue_id, partition)
                await conn.execute(stmt.RETRY_ITEMS.format(table=table), args)
            wake.add(info.name)
        if dead_ops:
            dead = _dead_queue_of(info, plan)
            with driver_errors(dead.name if dead else info.name):
                whys = (retry_reason(op.reason, op.dead, limit) for op in dead_ops)
                params = {
                    "seqs": int_array(op.key.seq for op in dead_ops),
                    "reasons": text_array(whys),
                    "now": now,
                }
                moved = await dead_letter(
                    conn, names, (info, partition), dead, stmt.DUE_GIVEN, params
                )
            if dead is not None and moved:
                wake.add(dead.name)


def _dead_queue_of(info: QueueInfo, plan: TxnPlan) -> QueueInfo | None:
    """The queue's dead queue as the plan knows it; None deletes dead items."""
    name = info.settings.dead_queue
    return None if name is None else plan.queues.get(name)


async def _renew(
    conn: Conn, names: stmt.Names, plan: TxnPlan, now: datetime | None
) -> list[Leased]:
    """Extend leases; the renewed items come back in the plan's order."""
    renewed: dict[str, Leased] = {}
    for (queue_id, partition), ops in _by_table(plan.renew, lambda op: op.key).items():
        info = plan.queues[ops[0].key.queue]
        args = {
            "seqs": int_array(op.key.seq for op in ops),
            "extend": [float(op.extend) for op in ops],
            "now": now,
        }
        with driver_errors(info.name):
            table = names.partition(queue_id, partition)
            cur = await conn.execute(
                stmt.RENEW_ITEMS.format(table=table, columns=stmt.ITEM_COLUMNS), args
            )
            for row in await cur.fetchall():
                record = rows.item(Leased, info, partition, row)
                renewed[record.id] = record
    return [renewed[op.key.id] for op in plan.renew]
