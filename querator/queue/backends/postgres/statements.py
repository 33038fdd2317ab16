"""Every SQL statement of the PostgreSQL backend, named and described, but the
DDL (:mod:`.schema`) and the parts of the one-statement transactions
(:mod:`.fused_sql`, beside :mod:`.fused`): queues, items, transactions,
dead-lettering. Every list of item columns here is built from
:data:`.schema.ITEM_TABLE`.

Templates are :class:`psycopg.sql.SQL` objects. Identifiers fill their
``{fields}`` through :class:`.schema.Names` (imported here too, for the
modules that name it ``stmt.Names``), which builds every table name from the
schema and internal numbers only; values are always bound parameters
(``%(name)s``). The alias ``t`` names the item table wherever
:data:`ITEM_COLUMNS` is selected.
"""

from __future__ import annotations

import functools
from typing import Final

from psycopg import sql

from querator.queue.backends.postgres.schema import (
    GIVEN,
    MOVED,
    SWEEP_KEY,
    given_arrays,
    given_values,
    insert_list,
    item_row,
    item_select,
)
from querator.queue.backends.postgres.schema import Names as Names  # noqa: PLC0414
from querator.queue.dead_reasons import ATTEMPTS_HEADER, REASON_HEADER, SOURCE_HEADER
from querator.queue.models import KEPT

# Names moved to .schema; ``stmt.Names`` is kept for the branches merged after.

# -- schema -----------------------------------------------------------------

SESSION_SETTINGS: Final = sql.SQL(
    "SELECT set_config('TimeZone', 'UTC', false),"
    " set_config('plan_cache_mode', CASE WHEN current_setting('citus.version', true) IS NULL"
    " THEN 'force_generic_plan' ELSE 'auto' END, false),"
    " set_config('enable_seqscan', 'off', false),"
    " set_config('jit', 'off', false)"
)
"""Run on every pooled connection: timestamps come back in UTC, prepared
statements keep one generic plan, scans go through indexes, and nothing is
JIT-compiled (on a Citus coordinator, plans stay PostgreSQL's choice: Citus
cannot route a generic plan of a statement whose bound values it must see).

Every hot statement looks rows up by key or leases in index order. A custom
plan per execution (PostgreSQL's choice for the first five executions, and for
good when it estimates the generic plan costlier, as it does for the
one-statement transactions) buys nothing, and cost a third of the server's CPU
in the workflow benchmark. And a plan made while a table was small (a new
queue, or a work queue whose items come and go) scans it whole for as long as
the plan lives, dead rows included: a quarter of the server's CPU in the same
benchmark. The few statements meant to read whole tables (:data:`SCANS_ALLOWED`)
turn sequential scans back on for their transaction.

With sequential scans off, a statement that can only scan (the one-row
maintenance claim) is costed above every JIT threshold, and PostgreSQL spent
137 ms of CPU on average (30-240 ms) compiling it with LLVM at each execution;
no statement of a lease queue runs long enough for JIT to pay, so it is off."""

SCANS_ALLOWED: Final = sql.SQL("SET LOCAL enable_seqscan = on")
ASYNC_COMMIT: Final = sql.SQL("SET LOCAL synchronous_commit = off")
"""A transaction whose commit does not wait for its flush (``TxnPlan.durable`` False)."""
"""First in the transaction of a statement that reads whole partitions (stats, clear)."""

# -- queues -----------------------------------------------------------------

QUEUE_COLUMNS: Final = sql.SQL(
    "id, name, lease_timeout, expire_timeout, max_attempts, dead_queue, reference,"
    " partitions, created_at, paused"
)
"""The columns :func:`rows.queue_info` maps, in order."""

INSERT_QUEUE: Final = sql.SQL(
    """
INSERT INTO {queues}
    (name, lease_timeout, expire_timeout, max_attempts, dead_queue, reference, partitions)
VALUES (%(name)s, %(lease_timeout)s, %(expire_timeout)s, %(max_attempts)s,
        %(dead_queue)s, %(reference)s, %(partitions)s)
RETURNING {columns}
"""
)
"""Adds a queue; a taken name raises a unique violation."""

SELECT_QUEUE: Final = sql.SQL("SELECT {columns} FROM {queues} WHERE name = %(name)s")
"""One queue by name."""

LOCK_QUEUE: Final = sql.SQL("SELECT {columns} FROM {queues} WHERE name = %(name)s FOR UPDATE")
"""One queue by name, locked until the transaction ends."""

UPDATE_QUEUE: Final = sql.SQL(
    """
UPDATE {queues}
SET lease_timeout = %(lease_timeout)s, expire_timeout = %(expire_timeout)s,
    max_attempts = %(max_attempts)s, dead_queue = %(dead_queue)s,
    reference = %(reference)s, partitions = %(partitions)s
WHERE name = %(name)s
RETURNING {columns}
"""
)
"""Stores new settings of a queue."""

PAUSE_QUEUE: Final = sql.SQL(
    "UPDATE {queues} SET paused = %(paused)s WHERE name = %(name)s RETURNING {columns}"
)
"""Pauses or resumes a queue (its clients are told by :data:`NOTIFY`, in the
same transaction)."""

DELETE_QUEUE: Final = sql.SQL("DELETE FROM {queues} WHERE name = %(name)s RETURNING id, partitions")
"""Removes a queue's row; returns what is needed to drop its tables."""

LOCK_TABLES: Final = sql.SQL("LOCK TABLE {tables} IN ACCESS EXCLUSIVE MODE")
"""Holds a queue's partition tables against every writer until the transaction ends."""

COUNT_ITEMS: Final = sql.SQL("(SELECT count(*) FROM {table})")
"""The number of items in one partition table (summed over a queue's tables)."""

LIST_QUEUES: Final = sql.SQL(
    "SELECT {columns} FROM {queues} WHERE name >= %(pivot)s ORDER BY name LIMIT %(limit)s"
)
"""A page of queues by name."""

QUEUES_WITH_DEAD_QUEUE: Final = sql.SQL(
    "SELECT name FROM {queues} WHERE dead_queue = %(dead_queue)s ORDER BY name"
)
"""Names of the queues that dead-letter into a queue."""

NOW: Final = "(array_remove(ARRAY[%(now)s, now()], NULL))[1]"
"""The instant a statement decides with: the client clock's when it gives one
(bound as ``now``; a test's :class:`~querator.clock.ManualClock`), else the
database's. Every statement that reads the time binds ``now``.

It reads as ``coalesce(%(now)s, now())`` (about 1 µs more per evaluation on
PostgreSQL), but evaluates both values: Citus refuses a non-immutable function inside
``COALESCE`` or ``CASE`` of a modifying statement (it could not evaluate it on
the coordinator lazily), and evaluates ``now()`` on the coordinator anywhere
else, so this one text serves plain PostgreSQL and a Citus coordinator alike
(docs/scale-out.md)."""

CLAIM_MAINTENANCE: Final = sql.SQL(
    """
UPDATE {maintenance} SET last_run = greatest(last_run, """
    + NOW
    + """)
WHERE last_run <= """
    + NOW
    + """ - make_interval(secs => %(interval)s::float8)
RETURNING true
"""
)
"""Returns a row for exactly one caller per interval (the row lock serialises).
``greatest(last_run, now)`` is ``now`` wherever the row qualifies; Citus 13.2.2's
coordinator crashes on a bare :data:`NOW` as a value of an ``UPDATE``."""


# -- items ------------------------------------------------------------------

ITEM_COLUMNS: Final = sql.SQL(item_select("t"))
"""The item columns :func:`rows.item` maps, in order; the table is aliased ``t``
(:data:`~.schema.ITEM_TABLE`)."""

DERIVED_ON_LEASE: Final = ("available_at", "client_id")
"""The item columns a lease does not return: after a lease ``available_at`` is
``lease_deadline`` and ``client_id`` the leasing client's
(:func:`~.rows.leases_of` fills them in)."""

LEASED_COLUMNS: Final = sql.SQL(item_select("t", DERIVED_ON_LEASE))
""":data:`ITEM_COLUMNS` as a lease returns them (:data:`DERIVED_ON_LEASE` NULL)."""

UNKEYED: Final = tuple(c for c in GIVEN if c.name != "dedup_key")
"""The per-item arrays of an insert of items without dedup keys."""


def produced(prefix: str = "") -> dict[str, str]:
    """What inserting a produced item puts in each column, reading the item from
    the arrays' row ``v`` and the queue's expiry from ``<prefix>expire_timeout``
    (counted from when the item becomes available)."""
    return {
        **given_values("v"),
        "version": "1",
        "available_at": f"coalesce(v.available_at, {NOW})",
        "attempts": "0",
        "expire_at": (
            f"greatest(v.available_at, {NOW})"
            f" + make_interval(secs => %({prefix}expire_timeout)s::float8)"
        ),
        "created_at": NOW,
    }


def produced_leased(prefix: str, client_id: str) -> dict[str, str]:
    """:func:`produced`, each item due now leased at once to ``client_id`` for
    ``<prefix>lease_timeout`` seconds (one due later is inserted as produced)."""
    lease = f"{NOW} + make_interval(secs => %({prefix}lease_timeout)s::float8)"
    due = f"(v.available_at IS NULL OR v.available_at <= {NOW})"
    return {
        **produced(prefix),
        "available_at": f"CASE WHEN {due} THEN {lease} ELSE v.available_at END",
        "lease_deadline": f"CASE WHEN {due} THEN {lease} END",
        "client_id": f"CASE WHEN {due} THEN {client_id} END",
        "attempts": f"CASE WHEN {due} THEN 1 ELSE 0 END",
        "leased_at": f"CASE WHEN {due} THEN {NOW} END",
    }


_GIVEN_ARRAYS, _GIVEN_NAMES = given_arrays("")
_PRODUCED_COLUMNS, _PRODUCED_VALUES = insert_list(produced())
_LEASED_COLUMNS, _LEASED_VALUES = insert_list(produced_leased("", "%(client_id)s"))
_UNKEYED_COLUMNS, _UNKEYED_VALUES = insert_list(
    {column: value for column, value in produced().items() if column != "dedup_key"}
)

INSERT_ITEMS: Final = sql.SQL(
    """
WITH inserted AS (
    INSERT INTO {table} ("""
    + _PRODUCED_COLUMNS
    + ")\n    SELECT "
    + _PRODUCED_VALUES
    + "\n    FROM unnest("
    + _GIVEN_ARRAYS
    + ") WITH ORDINALITY AS v("
    + _GIVEN_NAMES
    + """, ord)
    ORDER BY v.ord
    ON CONFLICT (dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
    RETURNING seq, dedup_key
),
woken AS (SELECT pg_notify(%(channel)s, %(queue)s)::text WHERE %(notify)s::boolean)
SELECT seq, dedup_key FROM inserted
UNION ALL SELECT -1, NULL FROM woken
"""
)
"""Inserts items in input order (so seqs ascend with it); held dedup keys are skipped.
With ``notify`` it also wakes the queue's listeners (at commit), which adds one
``(-1, NULL)`` row."""

INSERT_LEASED: Final = sql.SQL(
    """
INSERT INTO {table} AS t ("""
    + _LEASED_COLUMNS
    + ")\nSELECT "
    + _LEASED_VALUES
    + "\nFROM unnest("
    + _GIVEN_ARRAYS
    + ") WITH ORDINALITY AS v("
    + _GIVEN_NAMES
    + """, ord)
ORDER BY v.ord
ON CONFLICT (dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
RETURNING t.seq, t.dedup_key, {columns}
"""
)
"""Inserts items like :data:`INSERT_ITEMS`, each one due now already leased to
``client_id`` (``produce_leased``); returns the inserted rows whole.
Held dedup keys are skipped (the caller claims those items separately)."""

INSERT_BRANCH: Final = sql.SQL(
    """
{name} AS (
    INSERT INTO {table} ("""
    + _UNKEYED_COLUMNS
    + ")\n    SELECT "
    + _UNKEYED_VALUES
    + "\n    FROM unnest({arrays}) WITH ORDINALITY AS v("
    + ", ".join(c.name for c in UNKEYED)
    + """, ord)
    ORDER BY v.ord
    RETURNING seq
)"""
)
"""One partition's part of :data:`INSERT_UNKEYED`: its items in input order (so seqs
ascend with it). ``{name}`` names the CTE; ``{arrays}`` binds the items' arrays
(:func:`unkeyed_arrays`)."""

INSERT_UNKEYED_SELECT: Final = sql.SQL("SELECT {partition}::integer, seq FROM {name}")
"""The (partition, seq) rows of one :data:`INSERT_BRANCH`."""

INSERT_UNKEYED: Final = sql.SQL(
    """
WITH {branches},
woken AS (SELECT pg_notify(%(channel)s, %(queue)s)::text)
{selects}
UNION ALL SELECT -1, 0 FROM woken
"""
)
"""Inserts items without dedup keys into any partitions and wakes listeners, in one
statement (so one autocommit round trip); returns (partition, seq) per item and one
(-1, 0) row for the notification."""

SELECT_DEDUP: Final = sql.SQL(
    "SELECT seq, dedup_key FROM {table} WHERE dedup_key = ANY(%(keys)s::text[])"
)
"""The items that hold some dedup keys."""

NOTIFY: Final = sql.SQL("SELECT pg_notify(%(channel)s, q) FROM unnest(%(queues)s::text[]) AS q")
"""Wakes listeners of the schema's channel once per queue name."""

LISTEN: Final = sql.SQL("LISTEN {channel}")
"""Subscribes a connection to the schema's channel."""

PING: Final = sql.SQL("SELECT 1")
"""Checks that an idle listening connection is still alive."""

_LEASE_SET: Final = (
    """
SET available_at = """
    + NOW
    + """ + make_interval(secs => %(lease_timeout)s::float8),
    lease_deadline = """
    + NOW
    + """ + make_interval(secs => %(lease_timeout)s::float8),
    client_id = %(client_id)s,
    attempts = t.attempts + 1,
    version = t.version + 1,
    leased_at = greatest(t.available_at, """
    + NOW
    + """)
"""
)
"""What leasing a row (aliased ``t``) sets, shared by :data:`LEASE` and :data:`CLAIM`.
``leased_at`` is now (a leasable row's ``available_at`` is not later; Citus's
coordinator crashes on a bare :data:`NOW` as a value of an ``UPDATE``)."""

_LEASABLE: Final = (
    """available_at <= """
    + NOW
    + """
          AND (%(max_attempts)s::integer = 0 OR attempts < %(max_attempts)s::integer)
          AND expire_at > """
    + NOW
    + """
          AND (%(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s::text[]))"""
)
"""An item a lease may take now (of the given kinds, unless ``kinds`` is NULL)."""


PRIORITIZED: Final = sql.SQL("SELECT EXISTS (SELECT FROM {table} WHERE priority <> 0)")
"""Whether an item of the partition has a priority other than 0 (asked when
:data:`LEASE` found nothing)."""


_PRIORITIZED: Final = (
    "\nprioritized AS (SELECT EXISTS (SELECT FROM {table} WHERE priority <> 0) AS used)"
)
"""Whether any item of the partition has a priority other than 0: one probe of
the partial priority index (:data:`.schema.CREATE_PRIORITY_INDEX`), empty in a
queue that never uses priorities."""

_MARKER: Final = "\nUNION ALL SELECT NULL::timestamptz, " + item_row({}, typed=True)
"""A row shaped like a leased one whose ``lease_order`` is NULL: what
:data:`LEASE_BY_PRIORITY` adds when no item has a priority other than 0 any more."""

_PICK: Final = (
    """
    SELECT seq, available_at AS lease_order
    FROM {table}
    WHERE """
    + _LEASABLE
    + """
      AND NOT EXISTS (SELECT FROM {table} WHERE priority <> 0)
    ORDER BY available_at, seq
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
"""
)
"""The first leasable items of a partition whose items all have priority 0
(see :data:`LEASE`), locked: the CTE ``picked``."""

_TAKE: Final = (
    """UPDATE {table} AS t"""
    + _LEASE_SET
    + """FROM picked
WHERE t.seq = picked.seq
RETURNING picked.lease_order, {columns}
"""
)
"""Leases the rows of ``picked``, returning each with its ``available_at``
before the lease."""

LEASE: Final = sql.SQL("\nWITH picked AS (" + _PICK + ")\n" + _TAKE)
"""Leases the first leasable items of a partition (of the given kinds, unless
``kinds`` is NULL) by ``(available_at, seq)``; rows another client locks are
skipped. The lease of a partition whose items all have priority 0: a queue that
never uses priorities pays one probe of an empty index (the partial priority
index, :data:`.schema.CREATE_PRIORITY_INDEX`) for it. While some item has
another priority it leases nothing; the caller then finds that with
:data:`PRIORITIZED` and leases with :data:`LEASE_BY_PRIORITY`."""

_GONE: Final = (
    """
gone AS (
    DELETE FROM {done} AS t
    USING unnest(%(seqs)s::bigint[], %(versions)s::integer[]) AS w(seq, version)
    WHERE t.seq = w.seq AND t.version = w.version AND t.lease_deadline > """
    + NOW
    + """
    RETURNING t.seq, t.leased_at
)"""
)
"""Deletes the held items of one partition table (``done``) whose (seq, version)
match and whose lease holds: the CTE ``gone`` of :data:`COMPLETE_CHECKED` and
:data:`LEASE_COMPLETING`."""

_CHECKED: Final = (
    "SELECT CASE WHEN count(*) = %(count)s::bigint THEN count(*) ELSE {schema}.check_failed() END"
)
"""The count of ``gone``, or ``check_failed()`` when it is not ``count``."""

LEASE_COMPLETING: Final = sql.SQL(
    "WITH"
    + _GONE
    + ",\nchecked AS ("
    + _CHECKED
    + " FROM gone),\npicked AS ("
    + _PICK
    + "),\nleased AS (\n"
    + _TAKE
    + ")\nSELECT leased.* FROM checked LEFT JOIN leased ON true\n"
)
"""Completes held items of one partition table (``done``) as
:data:`COMPLETE_CHECKED` does, all or none, and leases as :data:`LEASE` in the
same statement: a looping consumer's one round trip. ``checked`` is the outer
side of the join, so it is always evaluated; when nothing was leased the one
row is all NULL (a NULL ``lease_order``, like :data:`LEASE_BY_PRIORITY`'s
marker). The completed rows are held, so never leasable: no row is touched
twice."""


def _levels(name: str, sign: str) -> str:
    """A recursive CTE of the distinct priorities ``{sign} 0`` in the priority
    index, highest first, one index probe each (a NULL row ends it)."""
    return f"""
{name}(priority) AS (
    (SELECT priority FROM {{table}}
     WHERE priority <> 0 AND priority {sign} 0 ORDER BY priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT t.priority FROM {{table}} AS t
            WHERE t.priority <> 0 AND t.priority {sign} 0 AND t.priority < l.priority
            ORDER BY t.priority DESC LIMIT 1)
    FROM {name} AS l WHERE l.priority IS NOT NULL
)"""


def _level_leg(levels: str) -> str:
    """The ready items of each priority of ``levels``, in lease order."""
    return (
        f"""
    SELECT r.seq, r.available_at FROM {levels} AS l CROSS JOIN LATERAL (
        SELECT seq, available_at FROM {{table}}
        WHERE priority = l.priority AND priority <> 0 AND """
        + _LEASABLE
        + """
        ORDER BY available_at, seq
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS r"""
    )


LEASE_BY_PRIORITY: Final = sql.SQL(
    "WITH RECURSIVE"
    + _PRIORITIZED
    + ","
    + _levels("above", ">")
    + ","
    + _levels("below", "<")
    + """,
picked AS (
    SELECT seq, available_at AS lease_order FROM ("""
    + _level_leg("above")
    + """
    UNION ALL
    SELECT * FROM (
        SELECT seq, available_at FROM {table}
        WHERE priority = 0 AND """
    + _LEASABLE
    + """
        ORDER BY available_at, seq
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS zero
    UNION ALL"""
    + _level_leg("below")
    + """
    ) AS ready
    LIMIT %(limit)s
),
leased AS (
    UPDATE {table} AS t"""
    + _LEASE_SET
    + """FROM picked
    WHERE t.seq = picked.seq
    RETURNING picked.lease_order, {columns}
)
SELECT * FROM leased"""
    + _MARKER
    + """ FROM prioritized WHERE NOT used
"""
)
"""Leases like :data:`LEASE`, highest priority first: items of a priority above
0, highest first, then priority 0, then those below; FIFO (``available_at,
seq``) within a priority. Each priority other than 0 is one probe of the
priority index for its ready items, which stops at the first item due later, so
items scheduled for later cost nothing. Adds the marker row when no item has a
priority other than 0 any more (the caller goes back to :data:`LEASE`)."""

CLAIM: Final = sql.SQL(
    """
UPDATE {table} AS t"""
    + _LEASE_SET
    + """WHERE t.seq = ANY(%(seqs)s::bigint[])
  AND t.available_at <= """
    + NOW
    + """
  AND (%(max_attempts)s::integer = 0 OR t.attempts < %(max_attempts)s::integer)
  AND t.expire_at > """
    + NOW
    + """
RETURNING {columns}
"""
)
"""Leases the given items of one partition that are leasable now (``produce_leased``)."""

NEXT_AVAILABLE_BRANCH: Final = sql.SQL(
    """
SELECT min(available_at) AS available_at FROM {table}
WHERE (%(max_attempts)s::integer = 0 OR attempts < %(max_attempts)s::integer)
  AND expire_at > """
    + NOW
    + """
  AND (%(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s::text[]))
"""
)
"""Earliest availability of one partition's live items; branches join by UNION ALL."""

NEXT_AVAILABLE: Final = sql.SQL("SELECT min(available_at) FROM ({branches}) AS m")
"""Earliest availability over all partitions of a queue."""

STATS_BRANCH: Final = sql.SQL(
    """
SELECT {partition}::integer, count(*),
       count(*) FILTER (WHERE lease_deadline > """
    + NOW
    + """),
       count(*) FILTER (WHERE available_at > """
    + NOW
    + """ AND lease_deadline IS NULL),
       count(*) FILTER (WHERE source_id IS NOT NULL),
       extract(epoch FROM """
    + NOW
    + """ - min(created_at))::float8
FROM {table}
"""
)
"""Counts of one partition (its number a literal); branches join by UNION ALL."""

GAUGES_BRANCH: Final = sql.SQL(
    """
SELECT {partition}::integer, c.n, w.total, w.held,
       extract(epoch FROM """
    + NOW
    + """ - h.head)::float8,
       (SELECT CASE WHEN p.reltuples < 0 THEN NULL
                    WHEN p.relpages = 0 THEN p.reltuples
                    ELSE p.reltuples / p.relpages
                         * (pg_relation_size(p.oid) / current_setting('block_size')::float8)
               END
        FROM pg_class AS p WHERE p.oid = to_regclass({regclass})),
       coalesce(pg_sequence_last_value(pg_get_serial_sequence({regclass}, 'seq')::regclass), 0)
FROM (SELECT count(*) AS n FROM (SELECT 1 FROM {table} LIMIT %(limit)s) AS s) AS c,
     (SELECT count(*) AS total, count(s.lease_deadline) AS held
      FROM (SELECT lease_deadline FROM {table} WHERE available_at > """
    + NOW
    + """
            ORDER BY available_at LIMIT %(limit)s) AS s) AS w,
     (SELECT min(s.available_at) AS head
      FROM (SELECT available_at FROM {table}
            WHERE available_at <= """
    + NOW
    + """
              AND (%(max_attempts)s::integer = 0 OR attempts < %(max_attempts)s::integer)
              AND expire_at > """
    + NOW
    + """
            ORDER BY available_at, seq LIMIT 1) AS s) AS h
"""
)
"""Bounded probes of one partition (branches join by UNION ALL): items counted up
to the limit; how many of the first ``limit`` items not yet available there are,
and how many of them are held (the available index's range above now); the
head of the lease order; the planner's row estimate (``reltuples`` per page
times the table's current pages, as the planner scales it; NULL before the
table was first analyzed); and the last seq the table's identity handed out
(items ever produced into it: its sequence's last value, read in O(1))."""

LIST_ITEMS: Final = sql.SQL(
    """
SELECT {columns} FROM {table} AS t
WHERE t.seq >= %(pivot)s
  AND (NOT %(scheduled_only)s
       OR (t.available_at > """
    + NOW
    + """ AND t.lease_deadline IS NULL))
ORDER BY t.seq
LIMIT %(limit)s
"""
)
"""A page of a partition's items by seq."""

LOOKUP_BRANCH: Final = sql.SQL(
    "SELECT {partition}::integer, {columns} FROM {table} AS t"
    " WHERE t.dedup_key = ANY(%(keys)s::text[])"
)
"""One partition's items holding any of the given dedup keys (UNION ALL per partition)."""

SCAN_KEYS_BRANCH: Final = sql.SQL(
    "(SELECT {partition}::integer, {columns} FROM {table} AS t"
    " WHERE t.dedup_key {low} %(low)s{high}"
    " ORDER BY t.dedup_key LIMIT %(limit)s)"
)
"""One partition's items by dedup key in a range (the key column is ``COLLATE "C"``:
code point order, like Python's); UNION ALL per partition, merged by the caller.
The upper bound is in the statement only when there is one: both bounds must be
index conditions, or a prefix with few keys reads the index to its end."""

DELETE_ITEMS: Final = sql.SQL(
    """
WITH locked AS (
    SELECT seq FROM {table} WHERE seq = ANY(%(seqs)s::bigint[]) ORDER BY seq FOR UPDATE
)
DELETE FROM {table} AS t USING locked WHERE t.seq = locked.seq
RETURNING t.seq
"""
)
"""Deletes items by seq, locking them in seq order; returns the seqs found."""

CLEAR_UNHELD: Final = sql.SQL(
    "DELETE FROM {table} WHERE lease_deadline IS NULL OR lease_deadline <= " + NOW
)
"""Deletes every item of a partition that no live lease holds."""

CLEAR_ALL: Final = sql.SQL("DELETE FROM {table}")
"""Deletes every item of a partition (seqs keep counting)."""

# -- transactions -------------------------------------------------------------

LOCK_ITEMS: Final = sql.SQL(
    """
SELECT seq, version, coalesce(lease_deadline > """
    + NOW
    + """, false), attempts,
       extract(epoch FROM """
    + NOW
    + """ - leased_at)::float8
FROM {table}
WHERE seq = ANY(%(seqs)s::bigint[])
ORDER BY seq
FOR UPDATE
"""
)
"""Locks items of one partition in seq order; returns (seq, version, held,
attempts, seconds since the lease began)."""

CHECK_FAILED_STATE: Final = "QR409"
"""SQLSTATE raised by ``{schema}.check_failed()``: a one-statement change found a
stale, missing or unleased item and changed nothing."""

COMPLETE_CHECKED: Final = sql.SQL(
    "WITH"
    + _GONE
    + "\n"
    + _CHECKED
    + """,
       array_agg(extract(epoch FROM """
    + NOW
    + """ - leased_at)::float8) FILTER (WHERE leased_at IS NOT NULL)
FROM gone
"""
)
"""Completes held items of one partition in one statement, all or none.

Deletes the rows whose (seq, version) match and whose lease holds; when fewer
than all matched, ``check_failed()`` raises and the statement undoes itself, and
the caller finds the reasons the slow way (:data:`LOCK_ITEMS`). Returns the
count, and how long each item had been leased (seconds from its ``leased_at``;
items leased before the store recorded it are left out). The seqs are
passed sorted: the plan walks them in order (a nested loop over the keys), so
rows are locked in seq order like every other change.
"""

CITUS_VERSION: Final = sql.SQL("SELECT current_setting('citus.version', true)")
"""The Citus version of a coordinator, or NULL on plain PostgreSQL."""

RETRY_CHECKED: Final = sql.SQL(
    """
WITH settled AS (
    SELECT set_config('synchronous_commit',
        CASE WHEN %(durable)s::boolean THEN current_setting('synchronous_commit') ELSE 'off' END,
        true) AS commit
),
back AS (
    UPDATE {table} AS t
    SET version = t.version + 1, lease_deadline = NULL, client_id = NULL, available_at = w.at
    FROM unnest(%(seqs)s::bigint[], %(versions)s::integer[],
                array_replace(%(ats)s::timestamptz[], NULL, """
    + NOW
    + """)) AS w(seq, version, at), settled
    WHERE t.seq = w.seq AND t.version = w.version AND t.lease_deadline > """
    + NOW
    + """
    RETURNING t.seq
),
woken AS (SELECT pg_notify(%(channel)s, w)::text FROM unnest(%(notify)s::text[]) AS w)
SELECT CASE WHEN (SELECT count(*) FROM back) = %(count)s::bigint
    THEN (SELECT count(*) FROM woken) ELSE {schema}.check_failed() END
"""
)
"""Retries held items of one partition now in one statement, all or none (as
:data:`COMPLETE_CHECKED`), waking ``notify`` at commit; with ``durable`` false
the commit does not wait for its flush (``set_config`` local to the statement's
own transaction, read when it commits). ``ats`` is an array of NULLs, one per
item, that the clock fills (as in :data:`RETRY_ITEMS`, for Citus)."""

DELETE_SEQS: Final = sql.SQL("DELETE FROM {table} WHERE seq = ANY(%(seqs)s::bigint[])")
"""Deletes locked items (complete, delete; dead-letter without a dead queue)."""

RETRY_ITEMS: Final = sql.SQL(
    """
UPDATE {table} AS t
SET version = t.version + 1, lease_deadline = NULL, client_id = NULL, available_at = v.retry_at
FROM unnest(%(seqs)s::bigint[], array_replace(%(retry_at)s::timestamptz[], NULL, """
    + NOW
    + """)) AS v(seq, retry_at)
WHERE t.seq = v.seq
"""
)
"""Releases locked items for another attempt, now or at their retry time (the
clock fills the array's NULLs: Citus refuses ``coalesce(v.retry_at, now())`` in
an ``UPDATE``, and crashes on an array of a column and ``now()``)."""

_RENEWED_UNTIL: Final = (
    "("
    + NOW
    + """ AT TIME ZONE 'UTC' + make_interval(secs => w.extend))
        AT TIME ZONE 'UTC'"""
)
"""A renewed lease's end: now + ``w.extend`` seconds, in UTC (see
:data:`RENEW_ITEMS`)."""

RENEW_ITEMS: Final = sql.SQL(
    """
UPDATE {table} AS t
SET version = t.version + 1, lease_deadline = """
    + _RENEWED_UNTIL
    + """, available_at = """
    + _RENEWED_UNTIL
    + """
FROM unnest(%(seqs)s::bigint[], %(extend)s::float8[]) AS w(seq, extend)
WHERE t.seq = w.seq
RETURNING {columns}
"""
)
"""Extends the leases of locked items; returns the renewed rows. The extension
is added in UTC (immutable arithmetic): Citus refuses ``timestamptz + interval``
(a stable operator) of a column in an ``UPDATE``."""


RENEW_CHECKED: Final = sql.SQL(
    """
WITH renewed AS (
    UPDATE {table} AS t
    SET version = t.version + 1, lease_deadline = """
    + _RENEWED_UNTIL
    + """, available_at = """
    + _RENEWED_UNTIL
    + """
    FROM unnest(%(seqs)s::bigint[], %(versions)s::integer[], %(extend)s::float8[])
        AS w(seq, version, extend)
    WHERE t.seq = w.seq AND t.version = w.version AND t.lease_deadline > """
    + NOW
    + """
    RETURNING {columns}
),
checked AS (
    SELECT CASE WHEN count(*) = %(count)s::bigint THEN count(*) ELSE {schema}.check_failed() END
    FROM renewed
)
SELECT renewed.* FROM checked LEFT JOIN renewed ON true
"""
)
"""Renews held items of one partition in one statement, all or none (as
:data:`COMPLETE_CHECKED`); returns the renewed rows (:data:`ITEM_COLUMNS`).
``checked`` is the outer side of the join, so it is always evaluated."""

# -- dead-lettering -----------------------------------------------------------

DUE_GIVEN: Final = sql.SQL(
    "SELECT d.seq, d.reason FROM unnest(%(seqs)s::bigint[], %(reasons)s::text[]) AS d(seq, reason)"
)
"""Dead-letter selection: the given (already locked) seqs, each with why."""

_DEAD_COLUMNS, _DEAD_VALUES = insert_list(
    {
        "version": "1",
        "available_at": NOW,
        "attempts": "0",
        "expire_at": (
            f"coalesce({NOW} + make_interval(secs => %(expire_timeout)s::float8),"
            f" '{KEPT.isoformat()}'::timestamptz)"
        ),
        **{column: f"m.{column}" for column in MOVED},
        "headers": (
            f"m.headers || jsonb_build_object('{ATTEMPTS_HEADER}', m.attempts::text,"
            f" '{REASON_HEADER}', m.reason, '{SOURCE_HEADER}', %(source_queue)s::text)"
        ),
        "source_id": "%(id_prefix)s || m.seq::text",
        "created_at": NOW,
    }
)

DUE_FOUND: Final = sql.SQL(
    """
SELECT seq, CASE WHEN %(max_attempts)s::integer > 0 AND attempts >= %(max_attempts)s::integer
            THEN %(exhausted)s::text ELSE %(expired)s::text END AS reason
FROM {source}
WHERE """
    + SWEEP_KEY
    + """ <= """
    + NOW
    + """
  AND available_at <= """
    + NOW
    + """
  AND ((%(max_attempts)s::integer > 0 AND attempts >= %(max_attempts)s::integer)
       OR expire_at <= """
    + NOW
    + """)
ORDER BY """
    + SWEEP_KEY
    + """
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED
"""
)
"""Dead-letter selection: unheld items that are exhausted or expired, found
through the sweep's index (:data:`SWEEP_KEY`), each with why."""

DEAD_MOVE: Final = sql.SQL(
    """
WITH due AS ({due}),
moved AS (
    DELETE FROM {source} AS s USING due WHERE s.seq = due.seq
    RETURNING s.seq, s.attempts, due.reason, """
    + ", ".join(f"s.{column}" for column in MOVED)
    + """
)
INSERT INTO {dead} ("""
    + _DEAD_COLUMNS
    + ")\nSELECT "
    + _DEAD_VALUES
    + """
FROM moved AS m
ORDER BY m.seq
"""
)
"""Moves selected items into a dead partition as new items in one statement,
their headers marked with their attempts, why and the source queue's name
(:mod:`querator.queue.dead_reasons`)."""

DEAD_DROP: Final = sql.SQL(
    "WITH due AS ({due}) DELETE FROM {source} AS s USING due WHERE s.seq = due.seq"
)
"""Deletes selected items of a queue that has no dead queue."""


# -- hot statements, rendered once per table ---------------------------------
# Composing a template costs 10-50 µs a call; the hot path executes the bytes.


@functools.lru_cache(maxsize=4096)
def prioritized_for(names: Names, queue_id: int, partition: int) -> bytes:
    """:data:`PRIORITIZED` on one partition table."""
    return PRIORITIZED.format(table=names.partition(queue_id, partition)).as_bytes(None)


@functools.lru_cache(maxsize=4096)
def lease_for(names: Names, queue_id: int, partition: int, by_priority: bool = False) -> bytes:
    """:data:`LEASE` (or :data:`LEASE_BY_PRIORITY`) on one partition table."""
    table = names.partition(queue_id, partition)
    statement = LEASE_BY_PRIORITY if by_priority else LEASE
    return statement.format(table=table, columns=LEASED_COLUMNS).as_bytes(None)


@functools.lru_cache(maxsize=4096)
def lease_completing_for(names: Names, queue_id: int, partition: int, done: int) -> bytes:
    """:data:`LEASE_COMPLETING` leasing from one partition table of a queue and
    completing in its partition ``done``."""
    statement = LEASE_COMPLETING.format(
        table=names.partition(queue_id, partition),
        done=names.partition(queue_id, done),
        schema=names.schema_id,
        columns=LEASED_COLUMNS,
    )
    return statement.as_bytes(None)


@functools.lru_cache(maxsize=4096)
def complete_for(names: Names, queue_id: int, partition: int) -> bytes:
    """:data:`COMPLETE_CHECKED` on one partition table."""
    table = names.partition(queue_id, partition)
    return COMPLETE_CHECKED.format(done=table, schema=names.schema_id).as_bytes(None)


@functools.lru_cache(maxsize=4096)
def retry_for(names: Names, queue_id: int, partition: int) -> bytes:
    """:data:`RETRY_CHECKED` on one partition table."""
    table = names.partition(queue_id, partition)
    return RETRY_CHECKED.format(table=table, schema=names.schema_id).as_bytes(None)


@functools.lru_cache(maxsize=4096)
def renew_for(names: Names, queue_id: int, partition: int) -> bytes:
    """:data:`RENEW_CHECKED` on one partition table."""
    table = names.partition(queue_id, partition)
    statement = RENEW_CHECKED.format(table=table, schema=names.schema_id, columns=ITEM_COLUMNS)
    return statement.as_bytes(None)


def unkeyed_prefix(partition: int) -> str:
    """The prefix of the names :data:`INSERT_UNKEYED` binds one partition's items under."""
    return f"p{partition}_"


@functools.lru_cache(maxsize=4096)
def insert_unkeyed_for(names: Names, queue_id: int, partitions: tuple[int, ...]) -> bytes:
    """:data:`INSERT_UNKEYED` into the given partitions of one queue."""
    branches = []
    selects = []
    for partition in partitions:
        name = sql.Identifier(f"p{partition}")
        arrays = sql.SQL(given_arrays(unkeyed_prefix(partition), UNKEYED)[0])
        table = names.partition(queue_id, partition)
        branches.append(INSERT_BRANCH.format(name=name, table=table, arrays=arrays))
        selects.append(INSERT_UNKEYED_SELECT.format(partition=sql.Literal(partition), name=name))
    statement = INSERT_UNKEYED.format(
        branches=sql.SQL(",").join(branches), selects=sql.SQL(" UNION ALL ").join(selects)
    )
    return statement.as_bytes(None)


@functools.lru_cache(maxsize=1024)
def scan_keys_for(
    names: Names, queue_id: int, partitions: int, include_low: bool, bounded: bool
) -> bytes:
    """:data:`SCAN_KEYS_BRANCH` over every partition of a queue, joined by UNION ALL."""
    low = sql.SQL(">=" if include_low else ">")
    high = sql.SQL(" AND t.dedup_key < %(high)s" if bounded else "")
    statement = sql.SQL(" UNION ALL ").join(
        SCAN_KEYS_BRANCH.format(
            partition=sql.Literal(n),
            columns=ITEM_COLUMNS,
            table=names.partition(queue_id, n),
            low=low,
            high=high,
        )
        for n in range(partitions)
    )
    return statement.as_bytes(None)


@functools.lru_cache(maxsize=4096)
def lookup_for(names: Names, queue_id: int, partitions: int) -> bytes:
    """:data:`LOOKUP_BRANCH` over every partition of a queue, joined by UNION ALL."""
    statement = sql.SQL(" UNION ALL ").join(
        LOOKUP_BRANCH.format(
            partition=sql.Literal(n),
            columns=ITEM_COLUMNS,
            table=names.partition(queue_id, n),
        )
        for n in range(partitions)
    )
    return statement.as_bytes(None)
