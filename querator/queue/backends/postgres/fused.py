"""``Backend.transact`` as one autocommit statement, for the common shape of plan.

The workflow layer commits every step as "complete this item, store its record,
produce (or claim) the next item". Run as a locking transaction that is five
round trips (BEGIN, DELETE, INSERT, INSERT, COMMIT); this module compiles such
a plan into a single statement of data-modifying CTEs, so it is one:

- one ``DELETE`` per item table completed, each checking version and lease on
  the rows it deletes (as :data:`statements.COMPLETE_CHECKED`); a count short
  of the keys raises ``check_failed()`` before any insert runs (every insert
  reads the ``ok`` row that counts the deletes);
- one locking no-op ``UPDATE`` per table of ``depends`` items (a fenced write, such
  as a workflow's ``recv`` record stored while its wake stays held), each
  counting the items still at the versions named, checked in the same ``ok``
  row;
- one ``INSERT`` per item table produced into (``ON CONFLICT DO NOTHING`` on
  dedup keys), or, for claimed items, inserted already leased;
- for keyed inserts, the items that already hold the keys (``hits``); when an
  insert came back short of what its inserts and hits explain (a key taken by
  a transaction that committed after the statement began), ``check_failed()``
  undoes the whole statement;
- one ``pg_notify`` per produced queue and per name the plans wake.

Several plans compile into one statement of the same shape (their items of
one table go into one ``INSERT``): :mod:`group_commit` runs concurrent
callers' transactions together. Any failed check makes :func:`run_fused`
return None with nothing changed, and each plan runs again on its own, in the
end the slow way (:mod:`transact`), which names the failed checks or handles
the race. A claimed item whose dedup key another item held is claimed after
the commit, as a lease of it would be.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql

from querator.queue.backends.base import InsertPlan, ItemKey, NewItem, TxnPlan
from querator.queue.backends.postgres import fused_sql as fsql
from querator.queue.backends.postgres import rows
from querator.queue.backends.postgres import statements as stmt
from querator.queue.backends.postgres.array_params import int_array, text_array
from querator.queue.backends.postgres.failures import driver_errors
from querator.queue.backends.postgres.items import Conn, insert_params
from querator.queue.backends.postgres.schema import ITEM_POSITION
from querator.queue.backends.postgres.transact import (
    DEADLOCK_STATE,
    addresses_plan_queue,
    claim_ids,
)
from querator.queue.ids import format_id
from querator.queue.models import Leased, QueueInfo, StoredItem, TransactResult


class Entry(NamedTuple):
    """One (queue, items) entry of a plan: a ``produce`` or a ``claim``."""

    plan: int
    """Index of the plan (in the group run together)."""
    name: str
    items: Sequence[NewItem]
    claimed: bool


class Insert(NamedTuple):
    """One insert of the statement: the items of every entry bound for one table."""

    queue: QueueInfo
    partition: int
    leased: bool
    slots: list[tuple[int, int]]
    """(entry, index into its items) of each item inserted, in order."""
    keys: list[str]
    """The dedup keys among them."""


class Shape(NamedTuple):
    """What the statement's text depends on (its cache key)."""

    deletes: tuple[tuple[int, int], ...]
    """(queue_id, partition) of each completed table, in lock order."""
    checks: tuple[tuple[int, int], ...]
    """(queue_id, partition) of each table of ``depends`` items, in lock order."""
    inserts: tuple[tuple[int, int, bool, bool], ...]
    """(queue_id, partition, leased, keyed) of each insert."""
    lookups: int
    """How many queues ``lookup`` asks about."""


def fusable(plan: TxnPlan) -> bool:
    """True when ``plan`` can run as one statement: it completes, checks
    (``depends``), produces and claims only (no retry, renew or delete), every
    queue it names is known, and no table receives two inserts."""
    if plan.retry or plan.renew or plan.delete:
        return False
    if not all(addresses_plan_queue(key, plan) for key in [*plan.complete, *plan.depends]):
        return False
    tables: set[tuple[int, int]] = set()
    for name, items in [*plan.produce, *plan.claim]:
        info = plan.queues.get(name)
        if info is None:
            return False
        for partition in {new.partition for new in items}:
            table = (info.queue_id, partition)
            if table in tables:
                return False
            tables.add(table)
    return bool(tables) or bool(plan.complete)


@dataclass
class _Compiled:
    shape: Shape
    params: dict[str, Any]
    inserts: list[Insert]
    entries: list[Entry]
    """Every plan's produce entries, then its claim entries, plan after plan."""
    insert_plans: list[InsertPlan]
    """Per entry: how its items map onto partitions."""
    lookups: list[tuple[QueueInfo, list[str]]]
    """Per looked-up queue: the keys every plan asks about."""


def _compile(plans: Sequence[TxnPlan], names: stmt.Names, now: datetime | None) -> _Compiled:
    params: dict[str, Any] = {"channel": names.channel, "now": now}
    deletes = _by_table(plans, params, "d", lambda plan: plan.complete)
    checks = _by_table(plans, params, "c", lambda plan: plan.depends)
    entries: list[Entry] = []
    for number, plan in enumerate(plans):
        entries += [Entry(number, name, items, False) for name, items in plan.produce]
        entries += [Entry(number, name, items, True) for name, items in plan.claim]
    inserts, insert_plans = _inserts(plans, entries, params)
    lookups = _lookups(plans, names, params)
    shape = Shape(
        tuple(deletes),
        tuple(checks),
        tuple((i.queue.queue_id, i.partition, i.leased, bool(i.keys)) for i in inserts),
        len(lookups),
    )
    return _Compiled(shape, params, inserts, entries, insert_plans, lookups)


def _by_table(
    plans: Sequence[TxnPlan],
    params: dict[str, Any],
    prefix: str,
    keys_of: Callable[[TxnPlan], Sequence[ItemKey]],
) -> list[tuple[int, int]]:
    """The tables of the plans' ``keys_of`` items (completed: prefix ``d``;
    checked: ``c``), in lock order; binds their keys."""
    by_table: dict[tuple[int, int], list[ItemKey]] = {}
    for plan in plans:
        for key in keys_of(plan):
            by_table.setdefault((key.queue_id, key.partition), []).append(key)
    tables = sorted(by_table)
    for number, table in enumerate(tables):
        keys = sorted(by_table[table], key=lambda key: key.seq)
        params[f"{prefix}{number}_seqs"] = int_array(key.seq for key in keys)
        params[f"{prefix}{number}_versions"] = int_array(key.version for key in keys)
        params[f"{prefix}{number}_count"] = len(keys)
    return tables


def _inserts(
    plans: Sequence[TxnPlan], entries: list[Entry], params: dict[str, Any]
) -> tuple[list[Insert], list[InsertPlan]]:
    """One insert per (table, leased or not); binds their items and the queues to wake."""
    grouped: dict[tuple[int, int, bool], Insert] = {}
    insert_plans: list[InsertPlan] = []
    notify: set[str] = set()
    for index, entry in enumerate(entries):
        info = plans[entry.plan].queues[entry.name]
        insert_plan = InsertPlan.of(entry.items)
        insert_plans.append(insert_plan)
        items = entry.items
        # a claimed item leased at once wakes nobody; one due later may
        wakes = not entry.claimed or any(n.available_at is not None for n in items)
        if items and wakes and entry.name not in plans[entry.plan].silent:
            notify.add(entry.name)
        for partition, indexes in insert_plan.by_partition.items():
            table = (info.queue_id, partition, entry.claimed)
            insert = grouped.setdefault(table, Insert(info, partition, entry.claimed, [], []))
            insert.slots.extend((index, i) for i in indexes)
            insert.keys.extend(key for i in indexes if (key := items[i].dedup_key) is not None)
    inserts = [grouped[table] for table in sorted(grouped)]
    for number, insert in enumerate(inserts):
        chunk = [entries[entry].items[i] for entry, i in insert.slots]
        for column, value in insert_params(insert.queue, chunk).items():
            params[f"i{number}_{column}"] = value
        params[f"i{number}_count"] = len(chunk)
        if insert.keys:
            params[f"i{number}_keys"] = text_array(insert.keys)
        if insert.leased:
            params[f"i{number}_lease_timeout"] = float(insert.queue.settings.lease_timeout)
            params[f"i{number}_client_id"] = text_array(
                plans[entries[entry].plan].client_id for entry, _ in insert.slots
            )
    for plan in plans:
        notify |= plan.wake
    params["notify"] = text_array(sorted(notify))
    return inserts, insert_plans


def _lookups(
    plans: Sequence[TxnPlan], names: stmt.Names, params: dict[str, Any]
) -> list[tuple[QueueInfo, list[str]]]:
    """Per looked-up queue, the keys any plan asks about; binds them and its tables."""
    wanted: dict[str, tuple[QueueInfo, dict[str, None]]] = {}
    for plan in plans:
        for name, keys in plan.lookup:
            info, merged = wanted.setdefault(name, (plan.queues[name], {}))
            merged.update(dict.fromkeys(keys))
    lookups = [(info, list(keys)) for info, keys in wanted.values()]
    for number, (info, keys) in enumerate(lookups):
        params[f"k{number}_tables"] = text_array(
            names.partition(info.queue_id, n).as_string(None)
            for n in range(info.settings.partitions)
        )
        params[f"k{number}_keys"] = text_array(keys)
    return lookups


async def run_fused(
    conn: Conn, names: stmt.Names, plans: Sequence[TxnPlan], now: datetime | None
) -> list[TransactResult] | None:
    """Apply :func:`fusable` plans together in one statement on an autocommit
    connection; their results, in order.

    None: a check of some plan failed (or a dedup key changed hands
    mid-statement, or a table is gone) and nothing changed; run each plan
    alone, the slow way.
    """
    compiled = _compile(plans, names, now)
    statement = statement_for(names, compiled.shape)
    values = [compiled.params[name] for name in statement.params]
    with driver_errors():
        try:
            async with psycopg.AsyncRawCursor(conn) as cur:
                await cur.execute(statement.text, values, binary=True)
                found = await cur.fetchall()
        except pg_errors.UndefinedTable:
            return None  # a queue was deleted: the slow path names it
        except psycopg.Error as exc:
            if exc.sqlstate in (stmt.CHECK_FAILED_STATE, DEADLOCK_STATE):
                return None
            raise
    return await _results(conn, names, plans, compiled, found)


async def _results(
    conn: Conn,
    names: stmt.Names,
    plans: Sequence[TxnPlan],
    compiled: _Compiled,
    found: list[Any],
) -> list[TransactResult]:
    """Map the statement's rows to each plan's ids (and leased items) in order."""
    entries = compiled.entries
    ids: list[list[str | None]] = [[None] * len(entry.items) for entry in entries]
    fresh: dict[str, Leased] = {}
    by_insert: dict[int, list[Any]] = {}
    looked_up: list[dict[str, StoredItem]] = [{} for _ in compiled.lookups]
    for row in found:
        if row[0] >= 0:
            by_insert.setdefault(row[0], []).append(row[1:])
        elif row[0] <= _LOOKUP_TAG:
            number, partition = divmod(_LOOKUP_TAG - row[0], _PARTITIONS)
            info = compiled.lookups[number][0]
            looked_up[number][row[1 + _DEDUP_KEY]] = rows.item(StoredItem, info, partition, row[1:])
    for number, insert in enumerate(compiled.inserts):
        queue_id, partition = insert.queue.queue_id, insert.partition
        got = by_insert.get(number, [])
        by_key = {row[_DEDUP_KEY]: row for row in got if row[_DEDUP_KEY] is not None}
        unkeyed_rows = iter(sorted((row for row in got if row[_DEDUP_KEY] is None), key=_seq))
        for slot, index in insert.slots:
            key = entries[slot].items[index].dedup_key
            row = next(unkeyed_rows) if key is None else by_key[key]
            item_id = format_id(queue_id, partition, row[0])
            ids[slot][index] = item_id
            if insert.leased and row[_CLIENT_ID] is not None:
                fresh[item_id] = rows.item(Leased, insert.queue, partition, row)
    produced: list[dict[str, list[str]]] = [{} for _ in plans]
    leased: list[dict[str, list[Leased | None]]] = [{} for _ in plans]
    for number, entry in enumerate(entries):
        entry_ids = compiled.insert_plans[number].ids_in_order(ids[number])
        if not entry.claimed:
            produced[entry.plan].setdefault(entry.name, []).extend(entry_ids)
            continue
        plan = plans[entry.plan]
        held = [item_id for item_id in dict.fromkeys(entry_ids) if item_id not in fresh]
        if held:  # dedup hits and items due later: lease what is leasable now
            assert plan.client_id is not None
            with driver_errors(entry.name):
                got_items = await claim_ids(
                    conn,
                    names,
                    plan.queues[entry.name],
                    held,
                    plan.client_id,
                    compiled.params["now"],
                )
            for item_id, item in zip(held, got_items, strict=True):
                if item is not None:
                    fresh[item_id] = item
        got = [fresh.get(item_id) for item_id in entry_ids]
        leased[entry.plan].setdefault(entry.name, []).extend(got)
    by_queue = {
        info.name: items for (info, _), items in zip(compiled.lookups, looked_up, strict=True)
    }
    return [
        TransactResult.model_construct(
            produced=produced[number],
            renewed=[],
            leased=leased[number],
            found={
                name: {key: by_queue[name][key] for key in keys if key in by_queue[name]}
                for name, keys in plan.lookup
            },
            held_for={},  # given: pydantic would inspect the default factory's signature
        )
        for number, plan in enumerate(plans)
    ]


def _seq(row: Sequence[Any]) -> int:
    return int(row[0])


_CLIENT_ID = ITEM_POSITION["client_id"]
_DEDUP_KEY = ITEM_POSITION["dedup_key"]
"""Positions in an :data:`statements.ITEM_COLUMNS` row."""
_LOOKUP_TAG = -1000
_PARTITIONS = 1024
"""A row of lookup ``k`` found in partition ``p`` is tagged ``-1000 - (k * 1024 + p)``
(a queue has at most 1024 partitions)."""

# -- the statement ------------------------------------------------------------


class Statement(NamedTuple):
    """A compiled statement: its text with ``$n`` placeholders, and the name of
    the parameter each ``$n`` takes, in order.

    Run through a raw cursor: psycopg converts ``%(name)s`` placeholders anew on
    every execution of a statement longer than 4 kB (or with more than 50
    parameters), which most of these are, at 145 µs each.
    """

    text: bytes
    params: tuple[str, ...]


_PLACEHOLDER = re.compile(rb"%\((\w+)\)[sb]")


def _numbered(text: bytes) -> Statement:
    """``text`` with each ``%(name)s`` (or ``b``) replaced by ``$n``, one n per name."""
    order: dict[bytes, int] = {}

    def number(match: re.Match[bytes]) -> bytes:
        return b"$%d" % order.setdefault(match[1], len(order) + 1)

    numbered = _PLACEHOLDER.sub(number, text)
    assert b"%" not in numbered, "a placeholder the statement compiler does not know"
    return Statement(numbered, tuple(name.decode() for name in order))


@functools.lru_cache(maxsize=1024)
def statement_for(names: stmt.Names, shape: Shape) -> Statement:
    """The one statement of a plan of this ``shape`` (its rows: see :func:`_results`)."""
    ctes: list[str] = []
    tables: dict[str, sql.Composable] = {"columns": stmt.ITEM_COLUMNS}
    for n, (queue_id, partition) in enumerate(shape.deletes):
        ctes.append(fsql.FUSED_DELETE.format(n=n))
        tables[f"d{n}"] = names.partition(queue_id, partition)
    for n, (queue_id, partition) in enumerate(shape.checks):
        ctes.append(fsql.FUSED_DEPEND.format(n=n))
        tables[f"c{n}"] = names.partition(queue_id, partition)
    deleted = " AND ".join(
        [
            *(fsql.FUSED_DELETED.format(n=n) for n in range(len(shape.deletes))),
            *(fsql.FUSED_DEPENDED.format(n=n) for n in range(len(shape.checks))),
        ]
    )
    ctes.append(fsql.FUSED_OK.format(deleted=deleted) if deleted else fsql.FUSED_OK_UNCHECKED)
    outputs = [fsql.fused_row("-2", "ok", "NULL::text", "ok", typed=True)]
    explained: list[str] = []
    for n, (queue_id, partition, leased, keyed) in enumerate(shape.inserts):
        tables[f"i{n}"] = names.partition(queue_id, partition)
        ctes.append((fsql.FUSED_INSERT_LEASED if leased else fsql.FUSED_INSERT).format(n=n))
        if leased:
            outputs.append(fsql.FUSED_LEASED_ROWS.format(n=n))
        else:
            outputs.append(fsql.fused_row(str(n), "seq", "dedup_key", f"i{n}", typed=False))
        explained.append(fsql.FUSED_INSERTED.format(n=n))
        if keyed:
            ctes.append(fsql.FUSED_HITS.format(n=n))
            outputs.append(fsql.fused_row(str(n), "seq", "dedup_key", f"h{n}", typed=False))
            explained[-1] += fsql.FUSED_HIT.format(n=n)
        explained[-1] += fsql.FUSED_EXPLAINED.format(n=n)
    if explained:
        done = fsql.FUSED_DONE.format(explained=" AND ".join(explained))
        outputs.append(fsql.fused_row("-3", done, "NULL", None, typed=False))
    ctes.append(fsql.FUSED_WOKEN)
    # Lookups run last, with a snapshot of their own: their ``after`` argument
    # reads every insert (and the deletes' check) first.
    after = " + ".join(
        [
            "(SELECT ok FROM ok)",
            *(fsql.FUSED_INSERTED.format(n=n) for n in range(len(shape.inserts))),
        ]
    )
    for k in range(shape.lookups):
        outputs.append(
            fsql.FUSED_LOOKUP.format(tag=_LOOKUP_TAG, k=k, partitions=_PARTITIONS, after=after)
        )
    outputs.append(fsql.fused_row("-1", "count(*)", "NULL", "woken", typed=False))
    text = "WITH" + ",".join(ctes) + "\n" + "\nUNION ALL ".join(outputs)
    # One line: fewer bytes to send, and to the prepared-statement cache's key.
    text = " ".join(text.split())
    return _numbered(sql.SQL(text).format(schema=names.schema_id, **tables).as_bytes(None))
