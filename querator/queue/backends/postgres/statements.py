"""Every SQL statement of the PostgreSQL backend, named and described.

Templates are :class:`psycopg.sql.SQL` objects. Identifiers fill their
``{fields}`` through :class:`Names`, which builds every table name from the
schema and internal numbers only; values are always bound parameters
(``%(name)s``). The alias ``t`` names the item table wherever
:data:`ITEM_COLUMNS` is selected.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from typing import Final

from psycopg import sql

from querator.errors import InvalidArgument

SCHEMA_PATTERN: Final = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
"""Accepted schema names: lower-case identifiers that never need quoting."""

_CHANNEL_PREFIX: Final = "querator_"
_MAX_IDENTIFIER: Final = 63


@dataclass(frozen=True, slots=True)
class Names:
    """The identifiers of one querator schema."""

    schema: str

    def __post_init__(self) -> None:
        if not SCHEMA_PATTERN.fullmatch(self.schema):
            raise InvalidArgument("schema", f"{self.schema!r} must match {SCHEMA_PATTERN.pattern}")

    @property
    def schema_id(self) -> sql.Identifier:
        """The schema itself."""
        return sql.Identifier(self.schema)

    @property
    def queues(self) -> sql.Identifier:
        """The table of queues and their settings."""
        return sql.Identifier(self.schema, "queues")

    @property
    def maintenance(self) -> sql.Identifier:
        """The one-row table that coordinates maintenance runs."""
        return sql.Identifier(self.schema, "maintenance")

    @property
    def channel(self) -> str:
        """The LISTEN/NOTIFY channel of this schema (at most 63 bytes)."""
        channel = _CHANNEL_PREFIX + self.schema
        if len(channel) > _MAX_IDENTIFIER:
            digest = hashlib.sha256(self.schema.encode()).hexdigest()[:32]
            channel = _CHANNEL_PREFIX + digest
        return channel

    def partition(self, queue_id: int, partition: int) -> sql.Identifier:
        """The item table of one partition, named from internal numbers only."""
        return sql.Identifier(self.schema, f"q{int(queue_id)}_p{int(partition)}")

    def index(self, queue_id: int, partition: int, suffix: str) -> sql.Identifier:
        """An index of a partition table (indexes live in their table's schema)."""
        return sql.Identifier(f"q{int(queue_id)}_p{int(partition)}_{suffix}")


# -- schema -----------------------------------------------------------------

SESSION_SETTINGS: Final = sql.SQL(
    "SELECT set_config('TimeZone', 'UTC', false),"
    " set_config('plan_cache_mode', 'force_generic_plan', false),"
    " set_config('enable_seqscan', 'off', false),"
    " set_config('jit', 'off', false)"
)
"""Run on every pooled connection: timestamps come back in UTC, prepared
statements keep one generic plan, scans go through indexes, and nothing is
JIT-compiled.

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
"""First in the transaction of a statement that reads whole partitions (stats, clear)."""

SCHEMA_LOCK: Final = sql.SQL("SELECT pg_advisory_xact_lock(hashtext(%(key)s))")
"""Serialises schema creation between processes for the current transaction."""

CREATE_SCHEMA: Final = sql.SQL(
    """
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {queues} (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text COLLATE "C" NOT NULL UNIQUE,
    lease_timeout double precision NOT NULL,
    expire_timeout double precision NOT NULL,
    max_attempts integer NOT NULL,
    dead_queue text COLLATE "C",
    reference text NOT NULL,
    partitions integer NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS queues_dead_queue ON {queues} (dead_queue)
    WHERE dead_queue IS NOT NULL;
CREATE TABLE IF NOT EXISTS {maintenance} (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    last_run timestamptz NOT NULL
);
INSERT INTO {maintenance} (id, last_run) VALUES (true, '-infinity')
    ON CONFLICT (id) DO NOTHING;
CREATE OR REPLACE FUNCTION {schema}.check_failed() RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'querator: a checked change found a failed check'
        USING ERRCODE = 'QR409';
END
$$;
CREATE OR REPLACE FUNCTION {schema}.lookup_keys(tables regclass[], keys text[], after bigint)
RETURNS TABLE (part integer, seq bigint, version integer, available_at timestamptz,
               lease_deadline timestamptz, client_id text, attempts integer,
               expire_at timestamptz, payload bytea, kind text, encoding text, reference text,
               headers text, dedup_key text, source_id text, created_at timestamptz)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    FOR n IN 1 .. coalesce(array_length(tables, 1), 0) LOOP
        RETURN QUERY EXECUTE format(
            'SELECT $2, t.seq, t.version, t.available_at, t.lease_deadline, t.client_id,'
            ' t.attempts, t.expire_at, t.payload, t.kind, t.encoding, t.reference,'
            ' t.headers::text, t.dedup_key, t.source_id, t.created_at'
            ' FROM %s AS t WHERE t.dedup_key = ANY($1)', tables[n])
        USING keys, n - 1;
    END LOOP;
END
$$;
"""
)
"""Creates the schema, the queue table, the maintenance row, ``check_failed()``,
which one-statement changes call to undo themselves, and ``lookup_keys()``,
which looks up dedup keys with a snapshot of its own: called at the end of a
one-statement change (``after`` makes it wait for the change's parts), it sees
the change and everything committed until then (idempotent)."""

CREATE_PARTITION: Final = sql.SQL(
    """
CREATE TABLE IF NOT EXISTS {table} (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    version integer NOT NULL,
    available_at timestamptz NOT NULL,
    lease_deadline timestamptz,
    client_id text,
    attempts integer NOT NULL,
    expire_at timestamptz NOT NULL,
    payload bytea NOT NULL,
    kind text NOT NULL,
    encoding text NOT NULL,
    reference text NOT NULL,
    headers jsonb NOT NULL,
    dedup_key text COLLATE "C",
    source_id text,
    created_at timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 70);
CREATE UNIQUE INDEX IF NOT EXISTS {dedup_index} ON {table} (dedup_key)
    WHERE dedup_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS {available_index} ON {table} (available_at, seq);
"""
)
"""Creates one partition's item table; fillfactor leaves room for HOT updates.
The dead-letter sweep's index comes with it (:data:`CREATE_SWEEP_INDEX`)."""

SWEEP_KEY: Final = (
    "(CASE WHEN attempts > 0 AND available_at < expire_at THEN available_at ELSE expire_at END)"
)
"""When an item becomes the sweep's to check: its expiry or, once it has been
leased, the end of its lease if sooner. Every exhausted or expired, unheld item
has this key in the past; a fresh item reaches it only when it expires."""

CREATE_SWEEP_INDEX: Final = sql.SQL(
    "CREATE INDEX IF NOT EXISTS {sweep_index} ON {table} (" + SWEEP_KEY + ");"
)
"""The index :data:`DUE_FOUND` walks, so that a sweep reads the items it may
move, not every due item of the partition (a backlog of 100k due items cost
12 ms of server CPU per sweep, growing with the backlog)."""

MISSING_SWEEP_INDEXES: Final = sql.SQL(
    """
SELECT q.id, p.n
FROM {queues} AS q, generate_series(0, q.partitions - 1) AS p(n)
WHERE to_regclass(format('%%I.%%I', %(schema)s::text, format('q%%s_p%%s_sweep', q.id, p.n)))
      IS NULL
ORDER BY q.id, p.n
"""
)
"""Partitions created before the sweep's index existed (opening adds it)."""

DROP_TABLES: Final = sql.SQL("DROP TABLE IF EXISTS {tables}")
"""Drops a queue's partition tables (``{tables}`` is a joined identifier list)."""

# -- queues -----------------------------------------------------------------

QUEUE_COLUMNS: Final = sql.SQL(
    "id, name, lease_timeout, expire_timeout, max_attempts, dead_queue, reference,"
    " partitions, created_at"
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

DELETE_QUEUE: Final = sql.SQL("DELETE FROM {queues} WHERE name = %(name)s RETURNING id, partitions")
"""Removes a queue's row; returns what is needed to drop its tables."""

LIST_QUEUES: Final = sql.SQL(
    "SELECT {columns} FROM {queues} WHERE name >= %(pivot)s ORDER BY name LIMIT %(limit)s"
)
"""A page of queues by name."""

QUEUES_WITH_DEAD_QUEUE: Final = sql.SQL(
    "SELECT name FROM {queues} WHERE dead_queue = %(dead_queue)s ORDER BY name"
)
"""Names of the queues that dead-letter into a queue."""

CLAIM_MAINTENANCE: Final = sql.SQL(
    """
UPDATE {maintenance} SET last_run = now()
WHERE last_run <= now() - make_interval(secs => %(interval)s::float8)
RETURNING true
"""
)
"""Returns a row for exactly one caller per interval (the row lock serialises)."""

# -- items ------------------------------------------------------------------

ITEM_COLUMNS: Final = sql.SQL(
    "t.seq, t.version, t.available_at, t.lease_deadline, t.client_id, t.attempts,"
    " t.expire_at, t.payload, t.kind, t.encoding, t.reference, t.headers::text, t.dedup_key,"
    " t.source_id, t.created_at"
)
"""The item columns :func:`rows.item` maps, in order; the table is aliased ``t``
(headers come as JSON text: most are ``{}``, which needs no parsing)."""

INSERT_ITEMS: Final = sql.SQL(
    """
WITH inserted AS (
    INSERT INTO {table}
        (version, available_at, attempts, expire_at, payload, kind, encoding, reference,
         headers, dedup_key)
    SELECT 1, coalesce(v.available_at, now()), 0,
           now() + make_interval(secs => %(expire_timeout)s::float8),
           v.payload, v.kind, v.encoding, v.reference, v.headers::jsonb, v.dedup_key
    FROM unnest(%(payload)b::bytea[], %(kind)s::text[], %(encoding)s::text[],
                %(reference)s::text[], %(headers)s::text[], %(available_at)s::timestamptz[],
                %(dedup_key)s::text[])
         WITH ORDINALITY AS v(payload, kind, encoding, reference, headers, available_at,
                              dedup_key, ord)
    ORDER BY v.ord
    ON CONFLICT (dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
    RETURNING seq, dedup_key
),
woken AS (SELECT pg_notify(%(channel)s, %(queue)s) WHERE %(notify)s::boolean)
SELECT seq, dedup_key FROM inserted
UNION ALL SELECT -1, NULL FROM woken
"""
)
"""Inserts items in input order (so seqs ascend with it); held dedup keys are skipped.
With ``notify`` it also wakes the queue's listeners (at commit), which adds one
``(-1, NULL)`` row."""

INSERT_LEASED: Final = sql.SQL(
    """
WITH v AS (
    SELECT v.*, (v.available_at IS NULL OR v.available_at <= now()) AS due
    FROM unnest(%(payload)b::bytea[], %(kind)s::text[], %(encoding)s::text[],
                %(reference)s::text[], %(headers)s::text[], %(available_at)s::timestamptz[],
                %(dedup_key)s::text[])
         WITH ORDINALITY AS v(payload, kind, encoding, reference, headers, available_at,
                              dedup_key, ord)
)
INSERT INTO {table} AS t
    (version, available_at, lease_deadline, client_id, attempts, expire_at, payload, kind,
     encoding, reference, headers, dedup_key)
SELECT 1,
       CASE WHEN v.due THEN now() + make_interval(secs => %(lease_timeout)s::float8)
            ELSE v.available_at END,
       CASE WHEN v.due THEN now() + make_interval(secs => %(lease_timeout)s::float8) END,
       CASE WHEN v.due THEN %(client_id)s END,
       CASE WHEN v.due THEN 1 ELSE 0 END,
       now() + make_interval(secs => %(expire_timeout)s::float8),
       v.payload, v.kind, v.encoding, v.reference, v.headers::jsonb, v.dedup_key
FROM v
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
    INSERT INTO {table}
        (version, available_at, attempts, expire_at, payload, kind, encoding, reference, headers)
    SELECT 1, coalesce(v.available_at, now()), 0,
           now() + make_interval(secs => %(expire_timeout)s::float8),
           v.payload, v.kind, v.encoding, v.reference, v.headers::jsonb
    FROM unnest({payload}::bytea[], {kind}::text[], {encoding}::text[], {reference}::text[],
                {headers}::text[], {available_at}::timestamptz[])
         WITH ORDINALITY AS v(payload, kind, encoding, reference, headers, available_at, ord)
    ORDER BY v.ord
    RETURNING seq
)"""
)
"""One partition's part of :data:`INSERT_UNKEYED`: its items in input order (so seqs
ascend with it). ``{name}`` names the CTE; the other fields are placeholders."""

INSERT_UNKEYED_SELECT: Final = sql.SQL("SELECT {partition}::integer, seq FROM {name}")
"""The (partition, seq) rows of one :data:`INSERT_BRANCH`."""

INSERT_UNKEYED: Final = sql.SQL(
    """
WITH {branches},
woken AS (SELECT pg_notify(%(channel)s, %(queue)s))
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

_LEASE_SET: Final = """
SET available_at = now() + make_interval(secs => %(lease_timeout)s::float8),
    lease_deadline = now() + make_interval(secs => %(lease_timeout)s::float8),
    client_id = %(client_id)s,
    attempts = t.attempts + 1,
    version = t.version + 1
"""
"""What leasing a row (aliased ``t``) sets, shared by :data:`LEASE` and :data:`CLAIM`."""

LEASE: Final = sql.SQL(
    """
WITH picked AS (
    SELECT seq, available_at AS lease_order
    FROM {table}
    WHERE available_at <= now()
      AND (%(max_attempts)s::integer = 0 OR attempts < %(max_attempts)s::integer)
      AND expire_at > now()
    ORDER BY available_at, seq
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE {table} AS t"""
    + _LEASE_SET
    + """FROM picked
WHERE t.seq = picked.seq
RETURNING picked.lease_order, {columns}
"""
)
"""Leases the first leasable items of a partition; rows another client locks are skipped."""

CLAIM: Final = sql.SQL(
    """
UPDATE {table} AS t"""
    + _LEASE_SET
    + """WHERE t.seq = ANY(%(seqs)s::bigint[])
  AND t.available_at <= now()
  AND (%(max_attempts)s::integer = 0 OR t.attempts < %(max_attempts)s::integer)
  AND t.expire_at > now()
RETURNING {columns}
"""
)
"""Leases the given items of one partition that are leasable now (``produce_leased``)."""

NEXT_AVAILABLE_BRANCH: Final = sql.SQL(
    """
SELECT min(available_at) AS available_at FROM {table}
WHERE (%(max_attempts)s::integer = 0 OR attempts < %(max_attempts)s::integer)
  AND expire_at > now()
"""
)
"""Earliest availability of one partition's live items; branches join by UNION ALL."""

NEXT_AVAILABLE: Final = sql.SQL("SELECT min(available_at) FROM ({branches}) AS m")
"""Earliest availability over all partitions of a queue."""

STATS_BRANCH: Final = sql.SQL(
    """
SELECT %s::integer, count(*),
       count(*) FILTER (WHERE lease_deadline > now()),
       count(*) FILTER (WHERE available_at > now() AND lease_deadline IS NULL),
       count(*) FILTER (WHERE source_id IS NOT NULL),
       extract(epoch FROM now() - min(created_at))::float8
FROM {table}
"""
)
"""Counts of one partition (its number bound positionally); branches join by UNION ALL."""

LIST_ITEMS: Final = sql.SQL(
    """
SELECT {columns} FROM {table} AS t
WHERE t.seq >= %(pivot)s
  AND (NOT %(scheduled_only)s OR (t.available_at > now() AND t.lease_deadline IS NULL))
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
    " WHERE t.dedup_key {low} %(low)s AND (%(high)s::text IS NULL OR t.dedup_key < %(high)s)"
    " ORDER BY t.dedup_key LIMIT %(limit)s)"
)
"""One partition's items by dedup key in a range (the key column is ``COLLATE "C"``:
code point order, like Python's); UNION ALL per partition, merged by the caller."""

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
    "DELETE FROM {table} WHERE lease_deadline IS NULL OR lease_deadline <= now()"
)
"""Deletes every item of a partition that no live lease holds."""

CLEAR_ALL: Final = sql.SQL("DELETE FROM {table}")
"""Deletes every item of a partition (seqs keep counting)."""

# -- transactions -------------------------------------------------------------

LOCK_ITEMS: Final = sql.SQL(
    """
SELECT seq, version, coalesce(lease_deadline > now(), false), attempts
FROM {table}
WHERE seq = ANY(%(seqs)s::bigint[])
ORDER BY seq
FOR UPDATE
"""
)
"""Locks items of one partition in seq order; returns (seq, version, held, attempts)."""

CHECK_FAILED_STATE: Final = "QR409"
"""SQLSTATE raised by ``{schema}.check_failed()``: a one-statement change found a
stale, missing or unleased item and changed nothing."""

COMPLETE_CHECKED: Final = sql.SQL(
    """
WITH gone AS (
    DELETE FROM {table} AS t
    USING unnest(%(seqs)s::bigint[], %(versions)s::integer[]) AS w(seq, version)
    WHERE t.seq = w.seq AND t.version = w.version AND t.lease_deadline > now()
    RETURNING t.seq
)
SELECT CASE WHEN count(*) = %(count)s::bigint THEN count(*) ELSE {schema}.check_failed() END
FROM gone
"""
)
"""Completes held items of one partition in one statement, all or none.

Deletes the rows whose (seq, version) match and whose lease holds; when fewer
than all matched, ``check_failed()`` raises and the statement undoes itself, and
the caller finds the reasons the slow way (:data:`LOCK_ITEMS`). The seqs are
passed sorted: the plan walks them in order (a nested loop over the keys), so
rows are locked in seq order like every other change.
"""

DELETE_SEQS: Final = sql.SQL("DELETE FROM {table} WHERE seq = ANY(%(seqs)s::bigint[])")
"""Deletes locked items (complete; dead-letter without a dead queue)."""

RETRY_ITEMS: Final = sql.SQL(
    """
UPDATE {table} AS t
SET version = t.version + 1, lease_deadline = NULL, client_id = NULL,
    available_at = coalesce(v.retry_at, now())
FROM unnest(%(seqs)s::bigint[], %(retry_at)s::timestamptz[]) AS v(seq, retry_at)
WHERE t.seq = v.seq
"""
)
"""Releases locked items for another attempt, now or at their retry time."""

RENEW_ITEMS: Final = sql.SQL(
    """
UPDATE {table} AS t
SET version = t.version + 1,
    lease_deadline = now() + make_interval(secs => v.extend),
    available_at = now() + make_interval(secs => v.extend)
FROM unnest(%(seqs)s::bigint[], %(extend)s::float8[]) AS v(seq, extend)
WHERE t.seq = v.seq
RETURNING {columns}
"""
)
"""Extends the leases of locked items; returns the renewed rows."""

# -- dead-lettering -----------------------------------------------------------

DUE_GIVEN: Final = sql.SQL("SELECT unnest(%(seqs)s::bigint[]) AS seq")
"""Dead-letter selection: the given (already locked) seqs."""

DUE_FOUND: Final = sql.SQL(
    """
SELECT seq FROM {source}
WHERE """
    + SWEEP_KEY
    + """ <= now()
  AND available_at <= now()
  AND ((%(max_attempts)s::integer > 0 AND attempts >= %(max_attempts)s::integer)
       OR expire_at <= now())
ORDER BY """
    + SWEEP_KEY
    + """
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED
"""
)
"""Dead-letter selection: unheld items that are exhausted or expired, found
through the sweep's index (:data:`SWEEP_KEY`)."""

DEAD_MOVE: Final = sql.SQL(
    """
WITH due AS ({due}),
moved AS (
    DELETE FROM {source} AS s USING due WHERE s.seq = due.seq
    RETURNING s.seq, s.payload, s.kind, s.encoding, s.reference, s.headers
)
INSERT INTO {dead}
    (version, available_at, attempts, expire_at, payload, kind, encoding, reference,
     headers, source_id)
SELECT 1, now(), 0, now() + make_interval(secs => %(expire_timeout)s::float8),
       m.payload, m.kind, m.encoding, m.reference, m.headers, %(id_prefix)s || m.seq::text
FROM moved AS m
ORDER BY m.seq
"""
)
"""Moves selected items into a dead partition as new items in one statement."""

DEAD_DROP: Final = sql.SQL(
    "WITH due AS ({due}) DELETE FROM {source} AS s USING due WHERE s.seq = due.seq"
)
"""Deletes selected items of a queue that has no dead queue."""


# -- hot statements, rendered once per table ---------------------------------
# Composing a template costs 10-50 µs a call; the hot path executes the bytes.

UNKEYED_COLUMNS: Final = ("payload", "kind", "encoding", "reference", "headers", "available_at")
"""The per-item parameters of :data:`INSERT_BRANCH`, each named ``<column>_<partition>``."""


@functools.lru_cache(maxsize=4096)
def lease_for(names: Names, queue_id: int, partition: int) -> bytes:
    """:data:`LEASE` on one partition table."""
    table = names.partition(queue_id, partition)
    return LEASE.format(table=table, columns=ITEM_COLUMNS).as_bytes(None)


@functools.lru_cache(maxsize=4096)
def complete_for(names: Names, queue_id: int, partition: int) -> bytes:
    """:data:`COMPLETE_CHECKED` on one partition table."""
    table = names.partition(queue_id, partition)
    return COMPLETE_CHECKED.format(table=table, schema=names.schema_id).as_bytes(None)


@functools.lru_cache(maxsize=4096)
def insert_unkeyed_for(names: Names, queue_id: int, partitions: tuple[int, ...]) -> bytes:
    """:data:`INSERT_UNKEYED` into the given partitions of one queue."""
    branches = []
    selects = []
    for partition in partitions:
        name = sql.Identifier(f"p{partition}")
        fields = {
            column: sql.Placeholder(f"{column}_{partition}", "b" if column == "payload" else "s")
            for column in UNKEYED_COLUMNS
        }
        table = names.partition(queue_id, partition)
        branches.append(INSERT_BRANCH.format(name=name, table=table, **fields))
        selects.append(INSERT_UNKEYED_SELECT.format(partition=sql.Literal(partition), name=name))
    statement = INSERT_UNKEYED.format(
        branches=sql.SQL(",").join(branches), selects=sql.SQL(" UNION ALL ").join(selects)
    )
    return statement.as_bytes(None)


@functools.lru_cache(maxsize=1024)
def scan_keys_for(names: Names, queue_id: int, partitions: int, include_low: bool) -> bytes:
    """:data:`SCAN_KEYS_BRANCH` over every partition of a queue, joined by UNION ALL."""
    low = sql.SQL(">=" if include_low else ">")
    statement = sql.SQL(" UNION ALL ").join(
        SCAN_KEYS_BRANCH.format(
            partition=sql.Literal(n),
            columns=ITEM_COLUMNS,
            table=names.partition(queue_id, n),
            low=low,
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
