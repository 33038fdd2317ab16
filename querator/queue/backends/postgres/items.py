"""Statements shared by single calls and transactions, run on a given connection."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from psycopg import AsyncConnection, sql

from querator.errors import Unavailable
from querator.queue.backends.base import InsertPlan, NewItem
from querator.queue.backends.postgres import rows
from querator.queue.backends.postgres import statements as stmt
from querator.queue.backends.postgres.array_params import (
    Payloads,
    instant_array,
    int_array,
    text_array,
)
from querator.queue.backends.postgres.schema import ITEM_POSITION
from querator.queue.ids import format_id
from querator.queue.models import Leased, QueueInfo

Conn = AsyncConnection[Any]
"""A connection from the pool (tuple rows)."""

_DEDUP_ROUNDS = 5
"""How often a dedup key may vanish between insert and lookup before giving up."""


async def insert_items(
    conn: Conn,
    names: stmt.Names,
    queue: QueueInfo,
    items: Sequence[NewItem],
    *,
    now: datetime | None,
    notify: bool = True,
    lease: LeaseOnInsert | None = None,
) -> list[str]:
    """Insert items into their partitions; returns ids in input order.

    A dedup key held by an item of the partition returns that item's id; a key
    repeated within ``items`` maps to its first occurrence's id. With
    ``notify``, the queue's listeners are woken at commit (by the same statement).
    With ``lease``, each inserted item that is due now is inserted already
    leased to its client and added to its ``leased`` by id (dedup hits are not).
    ``now`` is the client clock's instant (None: the database's).
    """
    ids: list[str | None] = [None] * len(items)
    plan = InsertPlan.of(items)
    woken = not notify
    for partition, pending in sorted(plan.by_partition.items()):
        await _insert_partition(
            conn, names, queue, partition, items, pending, ids, not woken, lease, now
        )
        woken = True
    return plan.ids_in_order(ids)


class LeaseOnInsert(NamedTuple):
    """Who inserted items are leased to, and where their leased records go, by id."""

    client_id: str
    leased: dict[str, Leased]


async def _insert_partition(
    conn: Conn,
    names: stmt.Names,
    queue: QueueInfo,
    partition: int,
    items: Sequence[NewItem],
    pending: list[int],
    ids: list[str | None],
    notify: bool,
    lease: LeaseOnInsert | None,
    now: datetime | None,
) -> None:
    """Insert ``items[i] for i in pending`` into one partition, filling ``ids``."""
    table = names.partition(queue.queue_id, partition)
    for _ in range(_DEDUP_ROUNDS):
        chunk = [items[i] for i in pending]
        params = insert_params(queue, chunk)
        params["now"] = now
        if lease is None:
            params.update(channel=names.channel, queue=queue.name, notify=notify)
            statement = stmt.INSERT_ITEMS.format(table=table)
        else:
            params.update(
                client_id=lease.client_id, lease_timeout=float(queue.settings.lease_timeout)
            )
            statement = stmt.INSERT_LEASED.format(table=table, columns=stmt.ITEM_COLUMNS)
        cur = await conn.execute(statement, params)
        inserted = sorted((row for row in await cur.fetchall() if row[0] >= 0), key=_seq)
        new_keys = {row[1] for row in inserted if row[1] is not None}
        placed = [
            i for i in pending if items[i].dedup_key is None or items[i].dedup_key in new_keys
        ]
        for index, row in zip(placed, inserted, strict=True):
            ids[index] = format_id(queue.queue_id, partition, row[0])
            if lease is not None and row[_CLIENT_ID] is not None:
                record = rows.item(Leased, queue, partition, row[2:])
                lease.leased[record.id] = record
        held = {items[i].dedup_key: i for i in pending if ids[i] is None}
        if not held:
            return
        cur = await conn.execute(stmt.SELECT_DEDUP.format(table=table), {"keys": text_array(held)})
        for seq, key in await cur.fetchall():
            ids[held[key]] = format_id(queue.queue_id, partition, seq)
        pending = [i for i in pending if ids[i] is None]
        if not pending:
            return
    raise Unavailable("dedup keys kept changing hands during produce; try again")


def _seq(row: Sequence[Any]) -> int:
    return int(row[0])


_CLIENT_ID = 2 + ITEM_POSITION["client_id"]
"""Where an :data:`INSERT_LEASED` row holds ``client_id`` (after seq and dedup_key)."""


async def insert_unkeyed(
    conn: Conn, names: stmt.Names, queue: QueueInfo, items: Sequence[NewItem], now: datetime | None
) -> list[str]:
    """Insert items that have no dedup key and wake listeners, as one statement.

    On an autocommit connection this is the whole produce in one round trip;
    returns the ids in input order.
    """
    call = UnkeyedInsert(names, queue, items, now)
    cur = await conn.execute(call.statement, call.params)
    return call.ids(await cur.fetchall())


class UnkeyedInsert:
    """The one statement that inserts items without dedup keys and wakes
    listeners, and the ids its rows make (sans I/O: :func:`insert_unkeyed` and
    the sync shell, :mod:`.sync_calls`, run it)."""

    __slots__ = ("_by_partition", "_count", "_queue", "params", "statement")

    def __init__(
        self, names: stmt.Names, queue: QueueInfo, items: Sequence[NewItem], now: datetime | None
    ) -> None:
        by_partition: dict[int, list[int]] = {}
        for index, new in enumerate(items):
            by_partition.setdefault(new.partition, []).append(index)
        params: dict[str, Any] = {
            "expire_timeout": float(queue.settings.expire_timeout),
            "channel": names.channel,
            "queue": queue.name,
            "now": now,
        }
        for partition, indexes in by_partition.items():
            columns = insert_params(queue, [items[i] for i in indexes], keyed=False)
            prefix = stmt.unkeyed_prefix(partition)
            params.update(
                {f"{prefix}{column.name}": columns[column.name] for column in stmt.UNKEYED}
            )
        self.statement = stmt.insert_unkeyed_for(names, queue.queue_id, tuple(sorted(by_partition)))
        """The statement to run with :attr:`params`."""
        self.params = params
        """Its bound parameters."""
        self._by_partition = by_partition
        self._count = len(items)
        self._queue = queue

    def ids(self, found: Sequence[Sequence[Any]]) -> list[str]:
        """The new items' ids in input order, from the statement's rows."""
        seqs: dict[int, list[int]] = {}
        for partition, seq in found:
            if partition >= 0:
                seqs.setdefault(partition, []).append(seq)
        queue_id = self._queue.queue_id
        ids: list[str] = [""] * self._count
        for partition, indexes in self._by_partition.items():
            for index, seq in zip(indexes, sorted(seqs.get(partition, ())), strict=True):
                ids[index] = format_id(queue_id, partition, seq)
        return ids


def insert_params(
    queue: QueueInfo, items: Sequence[NewItem], *, keyed: bool = True
) -> dict[str, Any]:
    """The bound per-item arrays (and the queue's expiry) of an insert statement;
    without ``dedup_key`` when not ``keyed`` (:data:`~.statements.UNKEYED`)."""
    params = {
        "expire_timeout": float(queue.settings.expire_timeout),
        "payload": Payloads(bytes(new.payload) for new in items),
        "kind": text_array(new.kind for new in items),
        "encoding": text_array(new.encoding for new in items),
        "reference": text_array(new.reference for new in items),
        "headers": text_array(
            json.dumps(dict(new.headers)) if new.headers else "{}" for new in items
        ),
        "available_at": instant_array(new.available_at for new in items),
        "priority": int_array(new.priority for new in items),
    }
    if keyed:
        params["dedup_key"] = text_array([new.dedup_key for new in items])
    return params


async def notify(conn: Conn, names: stmt.Names, queues: Collection[str]) -> None:
    """Wake listeners for each queue, at commit of the current transaction."""
    if queues:
        params = {"channel": names.channel, "queues": text_array(sorted(queues))}
        await conn.execute(stmt.NOTIFY, params)


async def dead_letter(
    conn: Conn,
    names: stmt.Names,
    source: tuple[QueueInfo, int],
    dead: QueueInfo | None,
    due: sql.SQL,
    params: dict[str, Any],
) -> int:
    """Move the items ``due`` selects from a source partition; returns how many.

    With a dead queue they become new items of its partition
    ``partition % dead.partitions``; without one they are deleted.
    """
    queue, partition = source
    table = names.partition(queue.queue_id, partition)
    selection = due.format(source=table)
    if dead is None:
        cur = await conn.execute(stmt.DEAD_DROP.format(due=selection, source=table), params)
        return cur.rowcount
    target = names.partition(dead.queue_id, partition % dead.settings.partitions)
    statement = stmt.DEAD_MOVE.format(due=selection, source=table, dead=target)
    args = {
        **params,
        "expire_timeout": dead.settings.dead_letter_expiry,
        "id_prefix": f"{queue.queue_id}.{partition}.",
        "source_queue": queue.name,
    }
    cur = await conn.execute(statement, args)
    return cur.rowcount
