"""The SQLite schema's versions, and the migrations that bring a file forward.

:func:`prepare_schema` runs when a backend opens (and for ``querator
migrate``) in one ``BEGIN IMMEDIATE`` transaction: it holds the file's write
lock, so two processes opening an old file at once migrate it once (the
second waits, then finds it current). A new file gets the newest catalog
directly. Versions are numbered like PostgreSQL's, so one number names one
schema on every backend; a version that changes nothing here still records
itself. The rules are in :mod:`querator.queue.backends.schema_versions`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Final

from querator.queue.backends import schema_versions as versions
from querator.queue.backends.schema_versions import Migration, SchemaReport, StoreVersion
from querator.queue.backends.sqlite import schema
from querator.queue.backends.sqlite.rows import KEPT_US, now_us
from querator.queue.models import DEFAULT_EXPIRE_TIMEOUT

__all__ = ["MIGRATIONS", "prepare_schema"]

Step = Callable[[sqlite3.Connection], None]
"""Applies one migration inside the migrating transaction."""


def _dedup_keys_by_code_point(conn: sqlite3.Connection) -> None:
    """SQLite's BINARY collation already compares dedup keys by code point:
    nothing to change but the sweep's index on partitions made before it."""
    schema.add_sweep_indexes(conn)


def _expiry_from_availability(conn: sqlite3.Connection) -> None:
    """Scheduled items expire counted from when they become available; a queue
    with the default expiry keeps its dead letters (as on PostgreSQL)."""
    queues = conn.execute(
        "SELECT id, partitions, expire_timeout = ? FROM queues", (DEFAULT_EXPIRE_TIMEOUT,)
    ).fetchall()
    for queue_id, partitions, keeps in queues:
        for partition in range(partitions):
            table = schema.table_name(queue_id, partition)
            conn.execute(
                f'UPDATE "{table}" SET expire_at = available_at + (expire_at - created_at)'
                " WHERE attempts = 0 AND source_id IS NULL AND available_at > created_at"
            )
            if keeps:
                conn.execute(
                    f'UPDATE "{table}" SET expire_at = ? WHERE source_id IS NOT NULL', (KEPT_US,)
                )


MIGRATIONS: Final[tuple[Migration[Step], ...]] = (
    Migration(1, "initial schema (querator's git tag schema-v1)", None),
    Migration(
        2,
        "dedup keys compare by code point (SQLite's BINARY collation already does)",
        _dedup_keys_by_code_point,
    ),
    Migration(
        3,
        "expiry counts from when an item becomes available; a dead queue with the"
        " default expiry keeps its dead letters",
        _expiry_from_availability,
    ),
    Migration(
        4,
        "items have a priority: an integer column (default 0) on item tables, and"
        " a partial index of the items whose priority is not 0",
        schema.add_priorities,
    ),
    Migration(
        5,
        "queues can be paused (a paused column on the queue table), and items record"
        " when their lease began (a leased_at column on item tables)",
        schema.add_paused_and_leased_at,
    ),
)
"""Every schema version, oldest first; append new ones (never edit a released one)."""


def prepare_schema(conn: sqlite3.Connection, store: str, apply: bool) -> SchemaReport:
    """Create or migrate the catalog to the newest version (``apply``), or say what
    that would do; run it inside a ``BEGIN IMMEDIATE`` transaction of ``conn``.

    Raises :class:`~querator.errors.SchemaTooNew` for a file a newer querator
    migrated beyond what this one can use.
    """
    found = _found(conn)
    if found is None:
        after = versions.newest(MIGRATIONS)
        if apply:
            schema.create_catalog(conn)
            _record(conn, after)
        return versions.report(store, None, (), after, apply)
    todo, after = versions.plan_migrations(MIGRATIONS, found, store)
    if apply and todo:
        for migration in todo:
            assert migration.step is not None, "version 1 is every store's baseline"
            migration.step(conn)
        schema.create_version_table(conn)
        _record(conn, after)
    return versions.report(store, found, todo, after, apply)


def _found(conn: sqlite3.Connection) -> StoreVersion | None:
    """The version of the store in the file, or None when it holds none."""
    tables = {name for (name,) in conn.execute(schema.STORE_TABLES)}
    if "queues" not in tables:
        return None
    row = conn.execute(schema.READ_VERSION).fetchone() if "schema_version" in tables else None
    return StoreVersion(1, 1) if row is None else StoreVersion(*row)


def _record(conn: sqlite3.Connection, version: StoreVersion) -> None:
    conn.execute(schema.WRITE_VERSION, (version.version, version.requires, now_us()))
