"""The PostgreSQL schema's versions, and the migrations that bring a store forward.

:func:`prepare_schema` runs when a backend opens (and for ``querator
migrate``), in one transaction under an advisory lock on the schema's name, so
two processes opening an old store at once migrate it once: the second waits,
then finds it current. A new store is created at the newest version directly
(:data:`.schema.CREATE_SCHEMA`); an older one runs each pending migration in
order, then gets the current functions (they hold no data) and its new
version. The rules are in :mod:`querator.queue.backends.schema_versions`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from psycopg import sql

from querator.queue.backends import schema_versions as versions
from querator.queue.backends.postgres import schema
from querator.queue.backends.postgres.items import Conn
from querator.queue.backends.postgres.schema import Names
from querator.queue.backends.schema_versions import Migration, SchemaReport, StoreVersion
from querator.queue.models import DEFAULT_EXPIRE_TIMEOUT, KEPT

__all__ = ["MIGRATIONS", "prepare_schema"]

Step = Callable[[Conn, Names], Awaitable[None]]
"""Applies one migration inside the migrating transaction."""


async def _dedup_keys_by_code_point(conn: Conn, names: Names) -> None:
    """Every item table's ``dedup_key`` becomes ``COLLATE "C"``; partitions made
    before the dead-letter sweep had its index get it too."""
    cur = await conn.execute(_fill(schema.QUEUE_TABLES, names))
    tables = [
        (queue_id, n) for queue_id, partitions in await cur.fetchall() for n in range(partitions)
    ]
    for queue_id, n in tables:
        await schema.run_each(
            conn,
            (
                schema.COLLATE_DEDUP_KEY.format(table=names.partition(queue_id, n)),
                schema.sweep_index_ddl(names, queue_id, n),
            ),
        )


async def _expiry_from_availability(conn: Conn, names: Names) -> None:
    """Scheduled items expire counted from when they become available; a queue
    with the default expiry keeps its dead letters."""
    params = {"default": DEFAULT_EXPIRE_TIMEOUT}
    cur = await conn.execute(_fill(schema.QUEUE_EXPIRIES, names), params)
    parts: list[sql.Composable] = []
    for queue_id, partitions, keeps in await cur.fetchall():
        for n in range(partitions):
            table = names.partition(queue_id, n)
            parts.append(schema.EXPIRE_FROM_AVAILABILITY.format(table=table))
            if keeps:
                kept = sql.Literal(KEPT)
                parts.append(schema.KEEP_DEAD_LETTERS.format(table=table, kept=kept))
    if parts:
        await conn.execute(sql.SQL("").join(parts), prepare=False)


async def _priorities(conn: Conn, names: Names) -> None:
    """Every item table gets a ``priority`` column (last, as new tables have it)
    and the partial index a lease probes for items of another priority than 0."""
    cur = await conn.execute(_fill(schema.QUEUE_TABLES, names))
    tables = [
        (queue_id, n) for queue_id, partitions in await cur.fetchall() for n in range(partitions)
    ]
    statements: list[sql.Composed] = [_fill(schema.DROP_LOOKUP_KEYS, names)]
    for queue_id, n in tables:
        statements.append(schema.ADD_PRIORITY.format(table=names.partition(queue_id, n)))
        statements.append(schema.priority_index_ddl(names, queue_id, n))
    await schema.run_each(conn, statements)


async def _paused_queues_and_lease_starts(conn: Conn, names: Names) -> None:
    """The queue table gets ``paused``; every item table gets ``leased_at``."""
    cur = await conn.execute(_fill(schema.QUEUE_TABLES, names))
    tables = [
        (queue_id, n) for queue_id, partitions in await cur.fetchall() for n in range(partitions)
    ]
    statements: list[sql.Composed] = [_fill(schema.ADD_PAUSED, names)]
    for queue_id, n in tables:
        statements.append(schema.ADD_LEASED_AT.format(table=names.partition(queue_id, n)))
    await schema.run_each(conn, statements)


MIGRATIONS: Final[tuple[Migration[Step], ...]] = (
    Migration(1, "initial schema (querator's git tag schema-v1)", None),
    Migration(
        2,
        'dedup keys compare by code point: item tables\' dedup_key becomes COLLATE "C"',
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
        "items have a priority: a smallint column (default 0) on item tables, and"
        " a partial index of the items whose priority is not 0",
        _priorities,
    ),
    Migration(
        5,
        "queues can be paused (a paused column on the queue table), and items record"
        " when their lease began (a leased_at column on item tables)",
        _paused_queues_and_lease_starts,
    ),
)
"""Every schema version, oldest first; append new ones (never edit a released one)."""


async def prepare_schema(conn: Conn, names: Names, store: str, apply: bool) -> SchemaReport:
    """Create or migrate the schema to the newest version (``apply``), or say what
    that would do; run it inside a transaction of ``conn``.

    Raises :class:`~querator.errors.SchemaTooNew` for a store a newer querator
    migrated beyond what this one can use.
    """
    await conn.execute(schema.SCHEMA_LOCK, {"key": f"querator:{names.schema}"})
    found = await _found(conn, names)
    if found is None:
        after = versions.newest(MIGRATIONS)
        if apply:
            await schema.run_each(conn, (_fill(s, names) for s in schema.CREATE_SCHEMA))
            await _record(conn, names, after)
        return versions.report(store, None, (), after, apply)
    todo, after = versions.plan_migrations(MIGRATIONS, found, store)
    if apply and todo:
        for migration in todo:
            assert migration.step is not None, "version 1 is every store's baseline"
            await migration.step(conn, names)
        await conn.execute(_fill(schema.CREATE_VERSION_TABLE, names), prepare=False)
        await schema.run_each(conn, (_fill(s, names) for s in schema.CREATE_FUNCTIONS))
        await _record(conn, names, after)
    return versions.report(store, found, todo, after, apply)


async def _found(conn: Conn, names: Names) -> StoreVersion | None:
    """The version of the store in the schema, or None when it holds none."""
    cur = await conn.execute(schema.STORE_TABLES, {"schema": names.schema})
    row = await cur.fetchone()
    assert row is not None
    has_store, has_version = row
    if not has_store:
        return None
    if not has_version:
        return StoreVersion(1, 1)
    cur = await conn.execute(_fill(schema.READ_VERSION, names))
    version = await cur.fetchone()
    return StoreVersion(1, 1) if version is None else StoreVersion(*version)


async def _record(conn: Conn, names: Names, version: StoreVersion) -> None:
    params = {"version": version.version, "requires": version.requires}
    await conn.execute(_fill(schema.WRITE_VERSION, names), params)


def _fill(template: sql.SQL, names: Names) -> sql.Composed:
    return template.format(
        schema=names.schema_id,
        queues=names.queues,
        maintenance=names.maintenance,
        schema_version=names.schema_version,
    )
