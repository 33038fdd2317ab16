"""``Backend.transact`` as one autocommit statement, for the common shape of plan.

The workflow layer commits every step as "complete this item, store its record,
produce (or claim) the next item". Run as a locking transaction that is five
round trips (BEGIN, DELETE, INSERT, INSERT, COMMIT); this module compiles such
a plan into a single statement of data-modifying CTEs, so it is one:

- one ``DELETE`` per item table completed, each checking version and lease on
  the rows it deletes (as :data:`statements.COMPLETE_CHECKED`); a count short
  of the keys raises ``check_failed()`` before any insert runs (every insert
  reads the ``ok`` row that counts the deletes);
- one ``INSERT`` per item table produced into (``ON CONFLICT DO NOTHING`` on
  dedup keys), or, for claimed items, inserted already leased;
- for keyed inserts, the items that already hold the keys (``hits``); when an
  insert came back short of what its inserts and hits explain (a key taken by
  a transaction that committed after the statement began), ``check_failed()``
  undoes the whole statement;
- one ``pg_notify`` per produced queue.

Any failed check makes :func:`run_fused` return None with nothing changed, and
the caller runs the plan the slow way (:mod:`transact`), which names the
failed checks or handles the race. A claimed item whose dedup key another item
held is claimed after the commit, as a lease of it would be.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql

from querator.queue.backends.base import InsertPlan, NewItem, TxnPlan
from querator.queue.backends.postgres import rows
from querator.queue.backends.postgres import statements as q
from querator.queue.backends.postgres.failures import driver_errors
from querator.queue.backends.postgres.items import Conn, insert_params
from querator.queue.backends.postgres.transact import (
    DEADLOCK_STATE,
    addresses_plan_queue,
    claim_ids,
    int_array,
)
from querator.queue.ids import format_id
from querator.queue.models import Leased, QueueInfo, StoredItem, TransactResult


class Insert(NamedTuple):
    """One insert of the statement: the plan entry's items bound for one table."""

    entry: int
    """Index of the (queue, items) entry in ``plan.produce`` + ``plan.claim``."""
    queue: QueueInfo
    partition: int
    indexes: list[int]
    """Indexes into the entry's items, in input order (repeated keys left out)."""
    leased: bool
    keyed: bool


class Shape(NamedTuple):
    """What the statement's text depends on (its cache key)."""

    deletes: tuple[tuple[int, int], ...]
    """(queue_id, partition) of each completed table, in lock order."""
    inserts: tuple[tuple[int, int, bool, bool], ...]
    """(queue_id, partition, leased, keyed) of each insert."""
    lookups: int
    """How many queues ``lookup`` asks about."""


def fusable(plan: TxnPlan) -> bool:
    """True when ``plan`` can run as one statement: it completes, produces and
    claims only (no retry, renew or pure checks), every queue it names is
    known, and no table receives two inserts."""
    if plan.retry or plan.renew or plan.depends:
        return False
    if not all(addresses_plan_queue(key, plan) for key in plan.complete):
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
    plans: list[InsertPlan]
    entries: list[tuple[str, Sequence[NewItem], bool]]
    """(queue name, items, claimed) per plan entry, produce entries first."""
    notify: list[str] = field(default_factory=list)


def _compile(plan: TxnPlan, names: q.Names) -> _Compiled:
    params: dict[str, Any] = {"channel": names.channel}
    deletes: list[tuple[int, int]] = []
    by_table: dict[tuple[int, int], list[Any]] = {}
    for key in sorted(plan.complete, key=lambda key: key.lock_order):
        by_table.setdefault((key.queue_id, key.partition), []).append(key)
    for number, (table, keys) in enumerate(by_table.items()):
        deletes.append(table)
        keys.sort(key=lambda key: key.seq)
        params[f"d{number}_seqs"] = int_array(key.seq for key in keys)
        params[f"d{number}_versions"] = int_array(key.version for key in keys)
        params[f"d{number}_count"] = len(keys)
    entries = [(name, items, False) for name, items in plan.produce]
    entries += [(name, items, True) for name, items in plan.claim]
    inserts: list[Insert] = []
    plans: list[InsertPlan] = []
    notify: set[str] = set()
    for entry, (name, items, claimed) in enumerate(entries):
        info = plan.queues[name]
        insert_plan = InsertPlan.of(items)
        plans.append(insert_plan)
        if items and (not claimed or any(new.available_at is not None for new in items)):
            notify.add(name)
        for partition, indexes in sorted(insert_plan.by_partition.items()):
            chunk = [items[i] for i in indexes]
            keys = [new.dedup_key for new in chunk if new.dedup_key is not None]
            number = len(inserts)
            inserts.append(Insert(entry, info, partition, indexes, claimed, bool(keys)))
            for column, value in insert_params(info, chunk).items():
                params[f"i{number}_{column}"] = value
            params[f"i{number}_count"] = len(chunk)
            if keys:
                params[f"i{number}_keys"] = keys
            if claimed:
                params[f"i{number}_lease_timeout"] = float(info.settings.lease_timeout)
    if plan.claim:
        params["client_id"] = plan.client_id
    params["notify"] = sorted(notify)
    for number, (name, wanted) in enumerate(plan.lookup):
        info = plan.queues[name]
        params[f"k{number}_tables"] = [
            names.partition(info.queue_id, n).as_string(None)
            for n in range(info.settings.partitions)
        ]
        params[f"k{number}_keys"] = list(wanted)
    shape = Shape(
        tuple(deletes),
        tuple((i.queue.queue_id, i.partition, i.leased, i.keyed) for i in inserts),
        len(plan.lookup),
    )
    return _Compiled(shape, params, inserts, plans, entries, sorted(notify))


async def run_fused(conn: Conn, names: q.Names, plan: TxnPlan) -> TransactResult | None:
    """Apply a :func:`fusable` plan in one statement on an autocommit connection.

    None: a check failed (or a dedup key changed hands mid-statement, or a
    table is gone) and nothing changed; run the plan the slow way.
    """
    compiled = _compile(plan, names)
    statement = statement_for(names, compiled.shape)
    with driver_errors():
        try:
            cur = await conn.execute(statement, compiled.params, binary=True)
        except pg_errors.UndefinedTable:
            return None  # a queue was deleted: the slow path names it
        except psycopg.Error as exc:
            if exc.sqlstate in (q.CHECK_FAILED_STATE, DEADLOCK_STATE):
                return None
            raise
        found = await cur.fetchall()
    return await _result(conn, names, plan, compiled, found)


async def _result(
    conn: Conn, names: q.Names, plan: TxnPlan, compiled: _Compiled, found: list[Any]
) -> TransactResult:
    """Map the statement's rows to ids (and leased items) in each entry's order."""
    ids: list[list[str | None]] = [[None] * len(items) for _, items, _ in compiled.entries]
    fresh: dict[str, Leased] = {}
    by_insert: dict[int, list[Any]] = {}
    looked_up: dict[str, dict[str, StoredItem]] = {name: {} for name, _ in plan.lookup}
    for row in found:
        if row[0] >= 0:
            by_insert.setdefault(row[0], []).append(row[1:])
        elif row[0] <= _LOOKUP_TAG:
            number, partition = divmod(_LOOKUP_TAG - row[0], _PARTITIONS)
            name = plan.lookup[number][0]
            stored = rows.item(StoredItem, plan.queues[name], partition, row[1:])
            looked_up[name][row[1 + _DEDUP_KEY]] = stored
    for number, insert in enumerate(compiled.inserts):
        items = compiled.entries[insert.entry][1]
        slots = ids[insert.entry]
        queue_id, partition = insert.queue.queue_id, insert.partition
        got = by_insert.get(number, [])
        by_key = {row[_DEDUP_KEY]: row for row in got if row[_DEDUP_KEY] is not None}
        unkeyed = sorted((row for row in got if row[_DEDUP_KEY] is None), key=_seq)
        unkeyed_rows = iter(unkeyed)
        for index in insert.indexes:
            key = items[index].dedup_key
            row = next(unkeyed_rows) if key is None else by_key[key]
            item_id = format_id(queue_id, partition, row[0])
            slots[index] = item_id
            if insert.leased and row[_CLIENT_ID] is not None:
                fresh[item_id] = rows.item(Leased, insert.queue, partition, row)
    produced: dict[str, list[str]] = {}
    leased: dict[str, list[Leased | None]] = {}
    for entry, (name, _, claimed) in enumerate(compiled.entries):
        entry_ids = compiled.plans[entry].ids_in_order(ids[entry])
        if not claimed:
            produced.setdefault(name, []).extend(entry_ids)
            continue
        held = [item_id for item_id in dict.fromkeys(entry_ids) if item_id not in fresh]
        if held:  # dedup hits and items due later: lease what is leasable now
            assert plan.client_id is not None
            info = plan.queues[name]
            with driver_errors(name):
                claimed_items = await claim_ids(conn, names, info, held, plan.client_id)
            for item_id, item in zip(held, claimed_items, strict=True):
                if item is not None:
                    fresh[item_id] = item
        leased.setdefault(name, []).extend(fresh.get(item_id) for item_id in entry_ids)
    return TransactResult.model_construct(
        produced=produced, renewed=[], leased=leased, found=looked_up
    )


def _seq(row: Sequence[Any]) -> int:
    return int(row[0])


_CLIENT_ID = 4
_DEDUP_KEY = 12
"""Positions in an :data:`statements.ITEM_COLUMNS` row."""
_LOOKUP_TAG = -1000
_PARTITIONS = 1024
"""A row of lookup ``k`` found in partition ``p`` is tagged ``-1000 - (k * 1024 + p)``
(a queue has at most 1024 partitions)."""

# -- the statement ------------------------------------------------------------

_NULL_ITEM = (
    "NULL::integer, NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::integer,"
    " NULL::timestamptz, NULL::bytea, NULL::text, NULL::text, NULL::text, NULL::text"
)
"""The :data:`statements.ITEM_COLUMNS` from version to headers, all NULL."""
_NULLS = ", ".join(["NULL"] * 11)
_LOOKED_UP = ", ".join(
    f"l.{column}"
    for column in [
        "seq",
        "version",
        "available_at",
        "lease_deadline",
        "client_id",
        "attempts",
        "expire_at",
        "payload",
        "kind",
        "encoding",
        "reference",
        "headers",
        "dedup_key",
        "source_id",
        "created_at",
    ]
)
"""The item columns of a ``lookup_keys()`` row, in :data:`statements.ITEM_COLUMNS` order."""

_DELETE = """
d{n} AS (
    DELETE FROM {{d{n}}} AS t
    USING unnest(%(d{n}_seqs)s::bigint[], %(d{n}_versions)s::integer[]) AS w(seq, version)
    WHERE t.seq = w.seq AND t.version = w.version AND t.lease_deadline > now()
    RETURNING t.seq
)"""

_VALUES = """
    FROM unnest(%(i{n}_payload)b::bytea[], %(i{n}_kind)s::text[], %(i{n}_encoding)s::text[],
                %(i{n}_reference)s::text[], %(i{n}_headers)s::text[],
                %(i{n}_available_at)s::timestamptz[], %(i{n}_dedup_key)s::text[])
         WITH ORDINALITY AS v(payload, kind, encoding, reference, headers, available_at,
                              dedup_key, ord)
    CROSS JOIN ok"""

_INSERT = (
    """
i{n} AS (
    INSERT INTO {{i{n}}}
        (version, available_at, attempts, expire_at, payload, kind, encoding, reference,
         headers, dedup_key)
    SELECT 1, coalesce(v.available_at, now()), 0,
           now() + make_interval(secs => %(i{n}_expire_timeout)s::float8),
           v.payload, v.kind, v.encoding, v.reference, v.headers::jsonb, v.dedup_key"""
    + _VALUES
    + """
    ORDER BY v.ord
    ON CONFLICT (dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
    RETURNING seq, dedup_key
)"""
)

_LEASE = "now() + make_interval(secs => %(i{n}_lease_timeout)s::float8)"
_DUE = "(v.available_at IS NULL OR v.available_at <= now())"

_INSERT_LEASED = (
    """
i{n} AS (
    INSERT INTO {{i{n}}} AS t
        (version, available_at, lease_deadline, client_id, attempts, expire_at, payload, kind,
         encoding, reference, headers, dedup_key)
    SELECT 1,
           CASE WHEN """
    + _DUE
    + " THEN "
    + _LEASE
    + """ ELSE v.available_at END,
           CASE WHEN """
    + _DUE
    + " THEN "
    + _LEASE
    + """ END,
           CASE WHEN """
    + _DUE
    + """ THEN %(client_id)s END,
           CASE WHEN """
    + _DUE
    + """ THEN 1 ELSE 0 END,
           now() + make_interval(secs => %(i{n}_expire_timeout)s::float8),
           v.payload, v.kind, v.encoding, v.reference, v.headers::jsonb, v.dedup_key"""
    + _VALUES
    + """
    ORDER BY v.ord
    ON CONFLICT (dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
    RETURNING {{columns}}
)"""
)

_HITS = """
h{n} AS (
    SELECT t.seq, t.dedup_key FROM {{i{n}}} AS t
    WHERE t.dedup_key = ANY(%(i{n}_keys)s::text[])
      AND t.dedup_key NOT IN (SELECT dedup_key FROM i{n} WHERE dedup_key IS NOT NULL)
)"""


@functools.lru_cache(maxsize=1024)
def statement_for(names: q.Names, shape: Shape) -> bytes:
    """The one statement of a plan of this ``shape`` (its rows: see :func:`_result`)."""
    ctes: list[str] = []
    tables: dict[str, sql.Composable] = {"columns": q.ITEM_COLUMNS}
    for n, (queue_id, partition) in enumerate(shape.deletes):
        ctes.append(_DELETE.format(n=n))
        tables[f"d{n}"] = names.partition(queue_id, partition)
    counts = " AND ".join(
        f"(SELECT count(*) FROM d{n}) = %(d{n}_count)s::bigint" for n in range(len(shape.deletes))
    )
    ok = f"CASE WHEN {counts} THEN 1 ELSE {{schema}}.check_failed() END" if counts else "1::bigint"
    ctes.append(f"\nok AS (SELECT {ok} AS ok)")
    outputs = [_row(-2, "ok", "NULL::text", "ok", typed=True)]
    explained: list[str] = []
    for n, (queue_id, partition, leased, keyed) in enumerate(shape.inserts):
        tables[f"i{n}"] = names.partition(queue_id, partition)
        ctes.append((_INSERT_LEASED if leased else _INSERT).format(n=n))
        if leased:
            outputs.append(f"SELECT {n}, l.* FROM i{n} AS l")
        else:
            outputs.append(_row(n, "seq", "dedup_key", f"i{n}"))
        explained.append(f"(SELECT count(*) FROM i{n})")
        if keyed:
            ctes.append(_HITS.format(n=n))
            outputs.append(_row(n, "seq", "dedup_key", f"h{n}"))
            explained[-1] += f" + (SELECT count(*) FROM h{n})"
        explained[-1] += f" = %(i{n}_count)s::bigint"
    if explained:
        done = f"CASE WHEN {' AND '.join(explained)} THEN 0 ELSE {{schema}}.check_failed() END"
        outputs.append(_row(-3, done, "NULL", None))
    ctes.append(
        "\nwoken AS (SELECT pg_notify(%(channel)s, w) FROM unnest(%(notify)s::text[]) AS w)"
    )
    # Lookups run last, with a snapshot of their own: their ``after`` argument
    # reads every insert (and the deletes' check) first.
    after = " + ".join(
        [
            "(SELECT ok FROM ok)",
            *(f"(SELECT count(*) FROM i{n})" for n in range(len(shape.inserts))),
        ]
    )
    for k in range(shape.lookups):
        outputs.append(
            f"SELECT {_LOOKUP_TAG} - ({k} * {_PARTITIONS} + l.part), {_LOOKED_UP} FROM"
            f" {{schema}}.lookup_keys(%(k{k}_tables)s::text[]::regclass[], %(k{k}_keys)s::text[],"
            f" {after}) AS l"
        )
    outputs.append(_row(-1, "count(*)", "NULL", "woken"))
    text = "WITH" + ",".join(ctes) + "\n" + "\nUNION ALL ".join(outputs)
    # One line: psycopg caches the parsing of statements up to 4 kB long.
    text = " ".join(text.split())
    return sql.SQL(text).format(schema=names.schema_id, **tables).as_bytes(None)


def _row(tag: int, seq: str, dedup_key: str, source: str | None, typed: bool = False) -> str:
    """An output row shaped like a leased one, carrying only ``seq`` and ``dedup_key``.

    Only the first row of the UNION needs its NULLs typed: the others take its types.
    """
    if typed:
        row = f"SELECT {tag}, {seq}, {_NULL_ITEM}, {dedup_key}, NULL::text, NULL::timestamptz"
    else:
        row = f"SELECT {tag}, {seq}, {_NULLS}, {dedup_key}, NULL, NULL"
    return row if source is None else f"{row} FROM {source}"
