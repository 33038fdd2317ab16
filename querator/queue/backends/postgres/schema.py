"""The PostgreSQL schema: the item table's columns, declared once, and the DDL.

:data:`ITEM_TABLE` is the one declaration of a partition's columns. The
``CREATE TABLE`` of a partition, the row type of ``lookup_keys()``, and every
list of item columns a statement selects, inserts or returns
(:mod:`.statements`) are built from it, so a column is added in one place.

The DDL here builds the newest schema in one go, for a new store; a store made
by an older querator is brought up to it by :mod:`.migrations`. Templates are
:class:`psycopg.sql.SQL` objects whose ``{fields}`` are identifiers from
:class:`Names`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from psycopg import AsyncConnection, sql

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
    def schema_version(self) -> sql.Identifier:
        """The one-row table of the schema's version."""
        return sql.Identifier(self.schema, "schema_version")

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


class Column(NamedTuple):
    """One column of the item table."""

    name: str
    type: str
    """Its SQL type as stored."""
    options: str = ""
    """The rest of its definition: constraints, collation, default."""
    read_as: str = ""
    """The type rows carry when it is not :attr:`type` (``headers`` reads as
    JSON text: most are ``{}``, which needs no parsing)."""
    given_as: str = ""
    """For the columns a producer gives, the type of the per-item array its
    values are bound as ("" for columns the store fills)."""
    read: bool = True
    """Whether rows read back carry it (:data:`READ`); a column only the store
    uses (``leased_at``) is written and asked for by name."""

    @property
    def definition(self) -> str:
        """The column as ``CREATE TABLE`` declares it."""
        return f"{self.name} {self.type} {self.options}".rstrip()

    @property
    def read_type(self) -> str:
        """The type of the column in a row read back."""
        return self.read_as or self.type


ITEM_TABLE: Final = (
    Column("seq", "bigint", "GENERATED ALWAYS AS IDENTITY PRIMARY KEY"),
    Column("version", "integer", "NOT NULL"),
    Column("available_at", "timestamptz", "NOT NULL", given_as="timestamptz"),
    Column("lease_deadline", "timestamptz"),
    Column("client_id", "text"),
    Column("attempts", "integer", "NOT NULL"),
    Column("expire_at", "timestamptz", "NOT NULL"),
    Column("payload", "bytea", "NOT NULL", given_as="bytea"),
    Column("kind", "text", "NOT NULL", given_as="text"),
    Column("encoding", "text", "NOT NULL", given_as="text"),
    Column("reference", "text", "NOT NULL", given_as="text"),
    Column("headers", "jsonb", "NOT NULL", read_as="text", given_as="text"),
    Column("dedup_key", "text", 'COLLATE "C"', given_as="text"),
    Column("source_id", "text"),
    Column("created_at", "timestamptz", "NOT NULL DEFAULT now()"),
    Column("priority", "smallint", "NOT NULL DEFAULT 0", given_as="smallint"),
    Column("leased_at", "timestamptz", read=False),
)
"""The columns of a partition's item table, in table order; rows are read in
this order (:func:`~.rows.item` maps them), the :attr:`Column.read` ones."""

READ: Final = tuple(column for column in ITEM_TABLE if column.read)
"""The columns of a row read back, in table order."""

ITEM_POSITION: Final = {column.name: n for n, column in enumerate(READ)}
"""Where each column sits in a row read with :func:`item_select`."""

_ALL_COLUMNS: Final = frozenset(column.name for column in ITEM_TABLE)

GIVEN: Final = tuple(column for column in ITEM_TABLE if column.given_as)
"""The columns a producer gives per item, bound as one array each."""

MOVED: Final = ("payload", "kind", "encoding", "reference", "headers", "priority")
"""The columns a dead-lettered item carries into its dead queue."""


def item_select(alias: str, derived: Collection[str] = ()) -> str:
    """Every item column of the table aliased ``alias``, in table order, as read;
    those named in ``derived`` (the reader knows them) as typed NULLs, which
    cost nothing to decode."""
    return ", ".join(
        f"NULL::{c.read_type}"
        if c.name in derived
        else f"{alias}.{c.name}" + (f"::{c.read_as}" if c.read_as else "")
        for c in READ
    )


def item_row(values: Mapping[str, str], typed: bool = False) -> str:
    """A row shaped like :func:`item_select`'s: ``values`` by column, NULL elsewhere
    (typed NULLs when ``typed``: the first row of a UNION sets the types)."""
    unknown = set(values) - set(ITEM_POSITION)
    assert not unknown, f"not item columns: {unknown}"
    null = "NULL::{}" if typed else "NULL"
    return ", ".join(values.get(c.name, null.format(c.read_type)) for c in READ)


def given_arrays(prefix: str, columns: Iterable[Column] = GIVEN) -> tuple[str, str]:
    """The per-item arrays of ``columns`` as ``unnest`` arguments bound from
    parameters named ``<prefix><column>``, and their column names."""
    columns = list(columns)
    arrays = ", ".join(
        f"%({prefix}{c.name}){'b' if c.given_as == 'bytea' else 's'}::{c.given_as}[]"
        for c in columns
    )
    return arrays, ", ".join(c.name for c in columns)


def given_values(source: str) -> dict[str, str]:
    """The value of each given column taken from row ``source`` of the arrays,
    cast to its stored type where it is bound as another."""
    return {
        c.name: f"{source}.{c.name}" + (f"::{c.type}" if c.type != c.given_as else "")
        for c in GIVEN
    }


def insert_list(values: Mapping[str, str]) -> tuple[str, str]:
    """An INSERT's column list and its matching value list, in table order."""
    unknown = set(values) - _ALL_COLUMNS
    assert not unknown, f"not item columns: {unknown}"
    names = [c.name for c in ITEM_TABLE if c.name in values]
    return ", ".join(names), ", ".join(values[name] for name in names)


# -- DDL ----------------------------------------------------------------------

SCHEMA_LOCK: Final = sql.SQL("SELECT pg_advisory_xact_lock(hashtext(%(key)s))")
"""Serialises schema creation and migration between processes for the current
transaction."""

_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS {schema_version} (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    version integer NOT NULL,
    requires integer NOT NULL,
    migrated_at timestamptz NOT NULL DEFAULT now()
)
"""
CREATE_VERSION_TABLE: Final = sql.SQL(_VERSION_TABLE)
"""The one-row table of the schema's version, and the oldest version a client
must know to use the store (see :mod:`.migrations`)."""

CREATE_FUNCTIONS: Final = (
    sql.SQL(
        """
CREATE OR REPLACE FUNCTION {schema}.check_failed() RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'querator: a checked change found a failed check'
        USING ERRCODE = 'QR409';
END
$$
"""
    ),
    sql.SQL(
        """
CREATE OR REPLACE FUNCTION {schema}.lookup_keys(tables regclass[], keys text[], after bigint)
RETURNS TABLE (part integer, """
        + ", ".join(f"{c.name} {c.read_type}" for c in READ)
        + """)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    FOR n IN 1 .. coalesce(array_length(tables, 1), 0) LOOP
        RETURN QUERY EXECUTE format(
            'SELECT $2, """
        + item_select("t")
        + """ FROM %s AS t WHERE t.dedup_key = ANY($1)', tables[n])
        USING keys, n - 1;
    END LOOP;
END
$$
"""
    ),
)
"""``check_failed()``, which one-statement changes call to undo themselves, and
``lookup_keys()``, which looks up dedup keys with a snapshot of its own: called
at the end of a one-statement change (``after`` makes it wait for the change's
parts), it sees the change and everything committed until then (idempotent).
Functions hold no data: :mod:`.migrations` replaces them after any migration."""

CREATE_SCHEMA: Final = (
    sql.SQL("CREATE SCHEMA IF NOT EXISTS {schema}"),
    sql.SQL(
        """
CREATE TABLE IF NOT EXISTS {queues} (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text COLLATE "C" NOT NULL UNIQUE,
    lease_timeout double precision NOT NULL,
    expire_timeout double precision NOT NULL,
    max_attempts integer NOT NULL,
    dead_queue text COLLATE "C",
    reference text NOT NULL,
    partitions integer NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    paused boolean NOT NULL DEFAULT false
)
"""
    ),
    sql.SQL(
        "CREATE INDEX IF NOT EXISTS queues_dead_queue ON {queues} (dead_queue)"
        " WHERE dead_queue IS NOT NULL"
    ),
    sql.SQL(
        """
CREATE TABLE IF NOT EXISTS {maintenance} (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    last_run timestamptz NOT NULL
)
"""
    ),
    sql.SQL(
        "INSERT INTO {maintenance} (id, last_run) VALUES (true, '-infinity')"
        " ON CONFLICT (id) DO NOTHING"
    ),
    CREATE_VERSION_TABLE,
    *CREATE_FUNCTIONS,
)
"""Creates the newest schema: the queue table, the maintenance row, the version
table (its row is written by :mod:`.migrations`) and the functions. Like every
DDL here it is a sequence of single statements, run one ``execute`` each
(:func:`run_each`): Citus refuses several commands in one string."""

CREATE_PARTITION: Final = (
    sql.SQL(
        "\nCREATE TABLE IF NOT EXISTS {table} (\n    "
        + ",\n    ".join(c.definition for c in ITEM_TABLE)
        + "\n) WITH (fillfactor = 70)"
    ),
    sql.SQL(
        "CREATE UNIQUE INDEX IF NOT EXISTS {dedup_index} ON {table} (dedup_key)"
        " WHERE dedup_key IS NOT NULL"
    ),
    sql.SQL("CREATE INDEX IF NOT EXISTS {available_index} ON {table} (available_at, seq)"),
)
"""Creates one partition's item table; fillfactor leaves room for HOT updates.
Its priority index comes with it (:data:`CREATE_PRIORITY_INDEX`), and
the dead-letter sweep's index (:data:`CREATE_SWEEP_INDEX`)."""


async def run_each(
    conn: AsyncConnection[Any], statements: Iterable[sql.SQL | sql.Composed]
) -> None:
    """Run ``statements`` in order, one ``execute`` each, unprepared (DDL runs once)."""
    for statement in statements:
        await conn.execute(statement, prepare=False)


SWEEP_KEY: Final = (
    "(CASE WHEN attempts > 0 AND available_at < expire_at THEN available_at ELSE expire_at END)"
)
"""When an item becomes the sweep's to check: its expiry or, once it has been
leased, the end of its lease if sooner. Every exhausted or expired, unheld item
has this key in the past; a fresh item reaches it only when it expires."""

CREATE_SWEEP_INDEX: Final = sql.SQL(
    "CREATE INDEX IF NOT EXISTS {sweep_index} ON {table} (" + SWEEP_KEY + ")"
)
"""The index :data:`~.statements.DUE_FOUND` walks, so that a sweep reads the
items it may move, not every due item of the partition (a backlog of 100k due
items cost 12 ms of server CPU per sweep, growing with the backlog)."""

CREATE_PRIORITY_INDEX: Final = sql.SQL(
    "CREATE INDEX IF NOT EXISTS {priority_index} ON {table} (priority DESC, available_at, seq)"
    " WHERE priority <> 0"
)
"""The index a lease probes for ready items of a priority other than 0
(:data:`~.statements.LEASE`): empty, and never written, while a queue's items
all have priority 0, so such a queue pays one probe of an empty index."""

DROP_TABLES: Final = sql.SQL("DROP TABLE IF EXISTS {tables}")
"""Drops a queue's partition tables (``{tables}`` is a joined identifier list)."""


def partitions_ddl(names: Names, tables: Iterable[tuple[int, int]]) -> list[sql.Composed]:
    """:data:`CREATE_PARTITION` and :data:`CREATE_SWEEP_INDEX` of each (queue_id, partition)."""
    statements: list[sql.Composed] = []
    for queue_id, n in tables:
        statements.extend(
            statement.format(
                table=names.partition(queue_id, n),
                dedup_index=names.index(queue_id, n, "dedup"),
                available_index=names.index(queue_id, n, "available"),
            )
            for statement in CREATE_PARTITION
        )
        statements.append(sweep_index_ddl(names, queue_id, n))
        statements.append(priority_index_ddl(names, queue_id, n))
    return statements


def priority_index_ddl(names: Names, queue_id: int, partition: int) -> sql.Composed:
    """:data:`CREATE_PRIORITY_INDEX` on one partition table."""
    return CREATE_PRIORITY_INDEX.format(
        table=names.partition(queue_id, partition),
        priority_index=names.index(queue_id, partition, "priority"),
    )


def sweep_index_ddl(names: Names, queue_id: int, partition: int) -> sql.Composed:
    """:data:`CREATE_SWEEP_INDEX` on one partition table."""
    return CREATE_SWEEP_INDEX.format(
        table=names.partition(queue_id, partition),
        sweep_index=names.index(queue_id, partition, "sweep"),
    )


# -- versions and migrations ---------------------------------------------------

STORE_TABLES: Final = sql.SQL(
    "SELECT to_regclass(format('%%I.queues', %(schema)s::text)) IS NOT NULL,"
    " to_regclass(format('%%I.schema_version', %(schema)s::text)) IS NOT NULL"
)
"""Whether the schema holds a store, and whether that store records its version
(a store made before versions were recorded is at version 1)."""

READ_VERSION: Final = sql.SQL("SELECT version, requires FROM {schema_version}")
"""The store's version and the oldest version a client must know to use it."""

WRITE_VERSION: Final = sql.SQL(
    """
INSERT INTO {schema_version} (id, version, requires) VALUES (true, %(version)s, %(requires)s)
ON CONFLICT (id) DO UPDATE
SET version = excluded.version, requires = excluded.requires, migrated_at = excluded.migrated_at
"""
)
"""Records the version the store is at now."""

QUEUE_TABLES: Final = sql.SQL("SELECT id, partitions FROM {queues} ORDER BY id")
"""Every queue's id and partition count: the item tables a migration changes."""

COLLATE_DEDUP_KEY: Final = sql.SQL(
    'ALTER TABLE {table} ALTER COLUMN dedup_key TYPE text COLLATE "C"'
)
"""Version 2: dedup keys compare by code point (rebuilds the table's dedup index)."""

QUEUE_EXPIRIES: Final = sql.SQL(
    "SELECT id, partitions, expire_timeout = %(default)s FROM {queues} ORDER BY id"
)
"""Version 3: every queue's id, partition count, and whether its expiry is the
default (a dead queue with the default expiry keeps its dead letters)."""

EXPIRE_FROM_AVAILABILITY: Final = sql.SQL(
    "UPDATE {table} SET expire_at = available_at + (expire_at - created_at)"
    " WHERE attempts = 0 AND source_id IS NULL AND available_at > created_at;"
)
"""Version 3: a scheduled item's expiry counts from when it becomes available
(it was stored counted from its production)."""

KEEP_DEAD_LETTERS: Final = sql.SQL(
    "UPDATE {table} SET expire_at = {kept} WHERE source_id IS NOT NULL;"
)
"""Version 3: the dead letters of a queue with the default expiry never expire."""

ADD_PRIORITY: Final = sql.SQL(
    "ALTER TABLE {table} ADD COLUMN IF NOT EXISTS priority smallint NOT NULL DEFAULT 0"
)
"""Version 4: items get a priority (a constant default: no table rewrite)."""

DROP_LOOKUP_KEYS: Final = sql.SQL(
    "DROP FUNCTION IF EXISTS {schema}.lookup_keys(regclass[], text[], bigint)"
)
"""Version 4: ``lookup_keys()`` returns the new column too, and a function's row
type cannot be replaced in place (:data:`CREATE_FUNCTIONS` creates it again)."""

ADD_LEASED_AT: Final = sql.SQL("ALTER TABLE {table} ADD COLUMN IF NOT EXISTS leased_at timestamptz")
"""Version 5: items record when their current lease began (NULL: never leased)."""

ADD_PAUSED: Final = sql.SQL(
    "ALTER TABLE {queues} ADD COLUMN IF NOT EXISTS paused boolean NOT NULL DEFAULT false"
)
"""Version 5: a queue can be paused (its items are not leased)."""
