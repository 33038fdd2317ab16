"""The SQLite catalog: the queues and maintenance tables, and one table per partition.

Partition tables are named ``q{queue_id}_p{partition}`` from internal numbers
only; user strings never become identifiers. Every time column holds integer
microseconds since the epoch (UTC). The tables are declared with SQLAlchemy and
compiled to DDL text for the SQLite dialect, which runs on the raw connection
like every other statement (:mod:`.statements`).
"""

from __future__ import annotations

import sqlite3

from sqlalchemy import (
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects import sqlite
from sqlalchemy.schema import CreateIndex, CreateTable, DropTable, ExecutableDDLElement

__all__ = [
    "READ_VERSION",
    "STORE_TABLES",
    "SWEEP_KEY",
    "WRITE_VERSION",
    "add_paused_and_leased_at",
    "add_priorities",
    "add_sweep_indexes",
    "catalog",
    "create_catalog",
    "create_partitions",
    "create_version_table",
    "drop_partitions",
    "maintenance",
    "partition_table",
    "queues",
    "schema_version",
    "table_name",
]

_DIALECT = sqlite.dialect()

catalog = MetaData()
"""The fixed tables; partition tables live outside it (see :func:`partition_table`)."""

queues = Table(
    "queues",
    catalog,
    Column("id", Integer, primary_key=True),
    Column("name", String, nullable=False, unique=True),
    Column("lease_timeout", Float, nullable=False),
    Column("expire_timeout", Float, nullable=False),
    Column("max_attempts", Integer, nullable=False),
    Column("dead_queue", String, nullable=True, index=True),
    Column("reference", String, nullable=False),
    Column("partitions", Integer, nullable=False),
    Column("created_at", Integer, nullable=False),
    Column("paused", Integer, nullable=False, server_default=text("0")),
    sqlite_autoincrement=True,
)
"""One row per queue; ``id`` is never reused, so a recreated queue rejects old ids."""

maintenance = Table(
    "maintenance",
    catalog,
    Column("id", Integer, primary_key=True),
    Column("last_run", Integer, nullable=False),
)
"""A single row (``id = 1``): when a client last claimed the maintenance run."""

schema_version = Table(
    "schema_version",
    catalog,
    Column("id", Integer, primary_key=True),
    Column("version", Integer, nullable=False),
    Column("requires", Integer, nullable=False),
    Column("migrated_at", Integer, nullable=False),
)
"""A single row (``id = 1``): the schema's version, and the oldest version a
client must know to use the store (see :mod:`.migrations`)."""


SWEEP_KEY = (
    "(CASE WHEN attempts > 0 AND available_at < expire_at THEN available_at ELSE expire_at END)"
)
"""What the dead-letter sweep's index orders by: an item's expiry or, once it
has been leased, the end of its lease if sooner. Every exhausted or expired,
unheld item has this key in the past; a fresh item reaches it only when it
expires, so a sweep reads the items it may move, not the backlog."""


def table_name(queue_id: int, partition: int) -> str:
    """The name of a partition table, built from numbers only."""
    return f"q{int(queue_id)}_p{int(partition)}"


def partition_table(queue_id: int, partition: int) -> Table:
    """The table object of one partition; it may not exist in the file yet."""
    name = table_name(queue_id, partition)
    return Table(
        name,
        MetaData(),
        Column("seq", Integer, primary_key=True),
        Column("version", Integer, nullable=False),
        Column("available_at", Integer, nullable=False),
        Column("lease_deadline", Integer, nullable=True),
        Column("client_id", String, nullable=True),
        Column("attempts", Integer, nullable=False),
        Column("expire_at", Integer, nullable=False),
        Column("payload", LargeBinary, nullable=False),
        Column("kind", String, nullable=False),
        Column("encoding", String, nullable=False),
        Column("reference", String, nullable=False),
        Column("headers", Text, nullable=False),
        Column("dedup_key", String, nullable=True, unique=True),
        Column("source_id", String, nullable=True),
        Column("created_at", Integer, nullable=False),
        Column("priority", Integer, nullable=False, server_default=text("0")),
        Column("leased_at", Integer, nullable=True),
        Index(f"{name}_available", "available_at", "seq"),
        Index(f"{name}_sweep", text(SWEEP_KEY)),
        Index(
            f"{name}_priority",
            text("priority DESC"),
            "available_at",
            "seq",
            sqlite_where=text("priority <> 0"),
        ),
        sqlite_autoincrement=True,
    )


def _run(conn: sqlite3.Connection, ddl: ExecutableDDLElement) -> None:
    conn.execute(str(ddl.compile(dialect=_DIALECT)))


def _create(conn: sqlite3.Connection, table: Table) -> None:
    _run(conn, CreateTable(table, if_not_exists=True))
    for index in sorted(table.indexes, key=lambda index: str(index.name)):
        _run(conn, CreateIndex(index, if_not_exists=True))


def create_catalog(conn: sqlite3.Connection) -> None:
    """Create the fixed tables and the maintenance row if they are missing."""
    for table in catalog.sorted_tables:
        _create(conn, table)
    conn.execute("INSERT INTO maintenance (id, last_run) VALUES (1, 0) ON CONFLICT DO NOTHING")


def create_version_table(conn: sqlite3.Connection) -> None:
    """Create the version table if it is missing (a file from before versions)."""
    _create(conn, schema_version)


def add_sweep_indexes(conn: sqlite3.Connection) -> None:
    """Give partitions that lack it the sweep's index (a file from an older querator)."""
    indexes = {
        row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
    }
    for queue_id, partitions in conn.execute("SELECT id, partitions FROM queues").fetchall():
        for partition in range(partitions):
            if f"{table_name(queue_id, partition)}_sweep" not in indexes:
                _create_index(conn, queue_id, partition, "sweep")


def add_priorities(conn: sqlite3.Connection) -> None:
    """Give every partition the ``priority`` column (last, as new tables have it)
    and its index (a file from an older querator)."""
    for queue_id, partitions in conn.execute("SELECT id, partitions FROM queues").fetchall():
        for partition in range(partitions):
            name = table_name(queue_id, partition)
            columns = {row[1] for row in conn.execute(f'PRAGMA table_info("{name}")')}
            if "priority" not in columns:
                conn.execute(f'ALTER TABLE "{name}" ADD COLUMN priority INTEGER NOT NULL DEFAULT 0')
            _create_index(conn, queue_id, partition, "priority")


def add_paused_and_leased_at(conn: sqlite3.Connection) -> None:
    """Give the queues table ``paused`` and every partition ``leased_at`` (last,
    as new tables have them; a file from an older querator)."""
    if "paused" not in {row[1] for row in conn.execute('PRAGMA table_info("queues")')}:
        conn.execute('ALTER TABLE "queues" ADD COLUMN paused INTEGER NOT NULL DEFAULT 0')
    for queue_id, partitions in conn.execute("SELECT id, partitions FROM queues").fetchall():
        for partition in range(partitions):
            name = table_name(queue_id, partition)
            columns = {row[1] for row in conn.execute(f'PRAGMA table_info("{name}")')}
            if "leased_at" not in columns:
                conn.execute(f'ALTER TABLE "{name}" ADD COLUMN leased_at INTEGER')


def _create_index(conn: sqlite3.Connection, queue_id: int, partition: int, suffix: str) -> None:
    """Create one index of a partition table if it is missing."""
    table = partition_table(queue_id, partition)
    wanted = f"{table.name}_{suffix}"
    for index in table.indexes:
        if index.name == wanted:
            _run(conn, CreateIndex(index, if_not_exists=True))


def create_partitions(conn: sqlite3.Connection, queue_id: int, partitions: range) -> None:
    """Create the tables (and indexes) of the given partitions if they are missing."""
    for partition in partitions:
        _create(conn, partition_table(queue_id, partition))


def drop_partitions(conn: sqlite3.Connection, queue_id: int, partitions: range) -> None:
    """Drop the tables (and their indexes) of the given partitions."""
    for partition in partitions:
        _run(conn, DropTable(partition_table(queue_id, partition), if_exists=True))


STORE_TABLES = (
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('queues', 'schema_version')"
)
"""Which of the store's table and its version table the file holds (a store made
before versions were recorded is at version 1)."""

READ_VERSION = "SELECT version, requires FROM schema_version WHERE id = 1"
"""The store's version and the oldest version a client must know to use it."""

WRITE_VERSION = (
    "INSERT INTO schema_version (id, version, requires, migrated_at) VALUES (1, ?, ?, ?)"
    " ON CONFLICT (id) DO UPDATE SET version = excluded.version,"
    " requires = excluded.requires, migrated_at = excluded.migrated_at"
)
"""Records the version the store is at now (times in microseconds)."""
