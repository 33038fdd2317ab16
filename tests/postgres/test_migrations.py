"""Schema versions on PostgreSQL: a version 1 store (built from the DDL frozen
from git tag schema-v1) migrated forward equals a fresh one, keeps its items,
is migrated once however many processes open it, by ``querator migrate`` too,
and a store from a newer querator is refused."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import schema_migrations as v1
from pg_schemas import drop_schema, with_query
from polling import wait_for
from psycopg import sql

from querator import Querator
from querator.errors import SchemaTooNew
from querator.queue.backends.postgres.migrations import MIGRATIONS
from querator.queue.models import KEPT

HERE = Path(__file__).parent
V1_SCHEMA = (HERE / "schema_v1.sql").read_text()
V1_PARTITION = (HERE / "schema_v1_partition.sql").read_text()


def build_v1_store(dsn: str, schema: str) -> None:
    """The store querator's schema version 1 made, with :data:`v1.ITEMS` in it."""
    with psycopg.connect(dsn) as conn:
        conn.execute(
            sql.SQL(V1_SCHEMA).format(
                schema=sql.Identifier(schema),
                queues=sql.Identifier(schema, "queues"),
                maintenance=sql.Identifier(schema, "maintenance"),
            )
        )
        insert_queue = sql.SQL(
            "INSERT INTO {} (name, lease_timeout, expire_timeout, max_attempts, dead_queue,"
            " reference, partitions) VALUES (%s, 30, 86400, %s, %s, '', %s) RETURNING id"
        ).format(sql.Identifier(schema, "queues"))
        for name, dead, partitions in [
            (v1.DEAD_QUEUE, None, 1),
            (v1.QUEUE, v1.DEAD_QUEUE, v1.PARTITIONS),
        ]:
            row = conn.execute(insert_queue, (name, v1.MAX_ATTEMPTS, dead, partitions)).fetchone()
            assert row is not None
            for n in range(partitions):
                conn.execute(_v1_partition(schema, row[0], n))
        for item in v1.ITEMS:
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (version, available_at, attempts, expire_at, payload, kind,"
                    " encoding, reference, headers, dedup_key) VALUES (1, now(), 0,"
                    " now() + interval '1 day', %s, '', '', '', '{{}}', %s)"
                ).format(sql.Identifier(schema, f"q2_p{item.partition}")),
                (item.payload, item.dedup_key),
            )


def _v1_partition(schema: str, queue_id: int, n: int) -> sql.Composed:
    def index(suffix: str) -> sql.Identifier:
        return sql.Identifier(f"q{queue_id}_p{n}_{suffix}")

    return sql.SQL(V1_PARTITION).format(
        table=sql.Identifier(schema, f"q{queue_id}_p{n}"),
        dedup_index=index("dedup"),
        available_index=index("available"),
        sweep_index=index("sweep"),
    )


Catalog = dict[str, list[tuple[Any, ...]]]
"""Rows of the system catalogs, by kind."""

_CATALOG = {
    "relations": "SELECT c.relname, c.relkind, c.reloptions FROM pg_class c"
    " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %(schema)s",
    "columns": "SELECT table_name, ordinal_position, column_name, data_type, collation_name,"
    " is_nullable, column_default, is_identity FROM information_schema.columns"
    " WHERE table_schema = %(schema)s",
    "indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %(schema)s",
    "constraints": "SELECT c.conname, c.contype, pg_get_constraintdef(c.oid) FROM pg_constraint c"
    " JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = %(schema)s",
    "functions": "SELECT p.proname, pg_get_function_arguments(p.oid),"
    " pg_get_function_result(p.oid), p.provolatile, p.prosrc FROM pg_proc p"
    " JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %(schema)s",
}
"""What a schema is made of, from the system catalogs, by kind."""


def catalog(dsn: str, schema: str) -> Catalog:
    """The schema's tables, columns (types, collations), indexes, constraints
    and functions, with its name replaced by ``S`` so two schemas compare."""
    found: Catalog = {}
    with psycopg.connect(dsn) as conn:
        for kind, query in _CATALOG.items():
            rows = conn.execute(query, {"schema": schema}).fetchall()
            found[kind] = sorted(
                tuple(str(value).replace(schema, "S") for value in row) for row in rows
            )
    return found


def store_version(dsn: str, schema: str) -> tuple[int, int] | None:
    """The (version, requires) the store records, or None without a version table."""
    with psycopg.connect(dsn) as conn:
        if conn.execute("SELECT to_regclass(%s)", (f"{schema}.schema_version",)).fetchone() == (
            None,
        ):
            return None
        row = conn.execute(
            sql.SQL("SELECT version, requires FROM {}").format(
                sql.Identifier(schema, "schema_version")
            )
        ).fetchone()
    return None if row is None else (row[0], row[1])


@pytest.fixture
def fresh_url(pg_dsn: str, pg_schema: str) -> str:
    """A second schema for a fresh store, beside the test's own."""
    return with_query(pg_dsn, schema=f"{pg_schema}_fresh")


@pytest.fixture
def fresh_catalog(pg_dsn: str, pg_schema: str, fresh_url: str) -> Iterator[Catalog]:
    """The catalog of a fresh store with the old one's queues (its schema dropped after)."""
    v1.make_fresh_store(fresh_url)
    yield catalog(pg_dsn, f"{pg_schema}_fresh")
    drop_schema(pg_dsn, f"{pg_schema}_fresh")


def test_the_newest_version_is_the_last_migration_and_a_fresh_store_records_it_without_migrating(
    pg_dsn: str, pg_schema: str, fresh_catalog: Catalog
) -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, v1.NEWEST + 1))
    assert store_version(pg_dsn, f"{pg_schema}_fresh") == (v1.NEWEST, 1)
    dedup = [c for c in fresh_catalog["columns"] if c[2] == "dedup_key"]
    assert dedup and {c[4] for c in dedup} == {"C"}


def test_an_old_store_opened_migrates_to_the_fresh_schema_and_keeps_its_items(
    pg_dsn: str, pg_schema: str, pg_schema_url: str, fresh_catalog: Catalog
) -> None:
    build_v1_store(pg_dsn, pg_schema)
    old = catalog(pg_dsn, pg_schema)
    assert old != fresh_catalog  # the comparison can tell them apart
    assert store_version(pg_dsn, pg_schema) is None

    with Querator(pg_schema_url):
        pass

    assert catalog(pg_dsn, pg_schema) == fresh_catalog
    assert store_version(pg_dsn, pg_schema) == (v1.NEWEST, 1)
    v1.check_items_work(pg_schema_url)


def test_processes_opening_an_old_store_at_once_migrate_it_once(
    pg_dsn: str, pg_schema: str, pg_schema_url: str, fresh_catalog: Catalog, tmp_path: Path
) -> None:
    build_v1_store(pg_dsn, pg_schema)
    marker = f"opener-{pg_schema}"
    url = with_query(pg_schema_url, application_name=marker)
    with psycopg.connect(pg_dsn, autocommit=True) as holder:
        # hold the schema's lock: both openers queue up on it, then race
        holder.execute("SELECT pg_advisory_lock(hashtext(%s))", (f"querator:{pg_schema}",))
        openers = v1.start_openers(url, 2, tmp_path)
        v1.wait_ready(openers)
        wait_for(lambda: _waiting_for_advisory_lock(holder, marker) == 2, timeout=30)
        holder.execute("SELECT pg_advisory_unlock(hashtext(%s))", (f"querator:{pg_schema}",))
    outputs = v1.finish_openers(openers)
    assert sum(text.count(v1.MIGRATED) for text in outputs) == 1, outputs
    assert catalog(pg_dsn, pg_schema) == fresh_catalog


def _waiting_for_advisory_lock(conn: psycopg.Connection[Any], application: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
        " WHERE l.locktype = 'advisory' AND NOT l.granted AND a.application_name = %s",
        (application,),
    ).fetchone()
    return 0 if row is None else int(row[0])


def test_querator_migrate_lists_pending_migrations_then_applies_them(
    pg_dsn: str, pg_schema: str, pg_schema_url: str, fresh_catalog: Catalog
) -> None:
    build_v1_store(pg_dsn, pg_schema)
    old = catalog(pg_dsn, pg_schema)

    dry = v1.migrate_cli(pg_schema_url, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "schema version 1" in dry.stdout
    assert "  2  dedup keys compare by code point" in dry.stdout
    assert "dry run, nothing changed" in dry.stdout
    assert catalog(pg_dsn, pg_schema) == old

    done = v1.migrate_cli(pg_schema_url)
    assert done.returncode == 0, done.stderr
    assert f"migrated to schema version {v1.NEWEST}" in done.stdout
    assert catalog(pg_dsn, pg_schema) == fresh_catalog

    again = v1.migrate_cli(pg_schema_url)
    assert f"at schema version {v1.NEWEST}: nothing to migrate" in again.stdout
    v1.check_items_work(pg_schema_url)


def test_a_store_from_a_newer_querator_is_refused_naming_both_versions(
    pg_dsn: str, pg_schema: str, pg_schema_url: str
) -> None:
    with Querator(pg_schema_url):
        pass
    table = sql.Identifier(pg_schema, "schema_version")
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(sql.SQL("UPDATE {} SET version = 7, requires = 7").format(table))

    with pytest.raises(SchemaTooNew) as refused:
        Querator(pg_schema_url)
    assert (refused.value.store_version, refused.value.known_version) == (7, v1.NEWEST)
    assert "schema version 7" in str(refused.value) and f"up to {v1.NEWEST}" in str(refused.value)
    cli = v1.migrate_cli(pg_schema_url, "--dry-run")
    assert cli.returncode == 1 and "schema version 7" in cli.stderr

    # a newer store that older clients may still use (its migrations were additive) opens
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(sql.SQL("UPDATE {} SET requires = 2").format(table))
    with Querator(pg_schema_url) as q:
        assert q.list_queues() == []
    assert store_version(pg_dsn, pg_schema) == (7, 2)  # left as it was


def test_migration_3_counts_expiry_from_availability_and_keeps_dead_letters(
    pg_dsn: str, pg_schema: str, pg_schema_url: str
) -> None:
    build_v1_store(pg_dsn, pg_schema)
    with psycopg.connect(pg_dsn) as conn:
        queues = sql.Identifier(pg_schema, "queues")
        conn.execute(sql.SQL("UPDATE {} SET expire_timeout = 604800 WHERE id = 1").format(queues))
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (version, available_at, attempts, expire_at, payload, kind,"
                " encoding, reference, headers) VALUES (1, now() + interval '10 days', 0,"
                " now() + interval '1 day', 'scheduled', '', '', '', '{{}}')"
            ).format(sql.Identifier(pg_schema, "q2_p0"))
        )
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (version, available_at, attempts, expire_at, payload, kind,"
                " encoding, reference, headers, source_id) VALUES (1, now(), 0,"
                " now() + interval '7 days', 'dead letter', '', '', '', '{{}}', '2.0.99')"
            ).format(sql.Identifier(pg_schema, "q1_p0"))
        )
    with Querator(pg_schema_url) as q:
        [scheduled] = [i for i in q.list_items(v1.QUEUE) if i.payload == b"scheduled"]
        assert scheduled.expire_at - scheduled.available_at == timedelta(days=1)
        [letter] = q.list_items(v1.DEAD_QUEUE)
        assert letter.expire_at == KEPT
