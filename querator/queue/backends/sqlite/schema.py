"""The SQLite catalog: the queues and maintenance tables, and one table per partition.

Partition tables are named ``q{queue_id}_p{partition}`` from internal numbers
only; user strings never become identifiers. Every time column holds integer
microseconds since the epoch (UTC).
"""

from __future__ import annotations

import threading

from sqlalchemy import (
    Column,
    Connection,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

__all__ = [
    "catalog",
    "create_catalog",
    "create_partitions",
    "drop_partitions",
    "maintenance",
    "partition_table",
    "queues",
    "table_name",
]

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

_tables: dict[tuple[int, int], Table] = {}
_tables_lock = threading.Lock()


def table_name(queue_id: int, partition: int) -> str:
    """The name of a partition table, built from numbers only."""
    return f"q{int(queue_id)}_p{int(partition)}"


def _build_partition(queue_id: int, partition: int) -> Table:
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
        Index(f"{name}_available", "available_at", "seq"),
        sqlite_autoincrement=True,
    )


def partition_table(queue_id: int, partition: int) -> Table:
    """The (cached) table object of one partition; it may not exist in the file yet."""
    key = (queue_id, partition)
    table = _tables.get(key)
    if table is None:
        with _tables_lock:
            table = _tables.get(key)
            if table is None:
                table = _tables[key] = _build_partition(queue_id, partition)
    return table


def create_catalog(conn: Connection) -> None:
    """Create the fixed tables and the maintenance row if they are missing."""
    catalog.create_all(conn, checkfirst=True)
    conn.execute(sqlite_insert(maintenance).values(id=1, last_run=0).on_conflict_do_nothing())


def create_partitions(conn: Connection, queue_id: int, partitions: range) -> None:
    """Create the tables (and indexes) of the given partitions if they are missing."""
    for partition in partitions:
        partition_table(queue_id, partition).create(conn, checkfirst=True)


def drop_partitions(conn: Connection, queue_id: int, partitions: range) -> None:
    """Drop the tables of the given partitions and forget their table objects."""
    for partition in partitions:
        partition_table(queue_id, partition).drop(conn, checkfirst=True)
        with _tables_lock:
            _tables.pop((queue_id, partition), None)
