"""Schema versions on SQLite: a version 1 file (built from the DDL frozen from
git tag schema-v1) migrated forward equals a fresh one, keeps its items, is
migrated once however many processes open it, by ``querator migrate`` too,
and a file from a newer querator is refused."""

from __future__ import annotations

import sqlite3
import time
from datetime import timedelta
from pathlib import Path

import pytest
import schema_migrations as v1

from querator import Querator
from querator.errors import SchemaTooNew
from querator.queue.backends.sqlite.migrations import MIGRATIONS
from querator.queue.models import KEPT

HERE = Path(__file__).parent
V1_SCHEMA = (HERE / "schema_v1.sql").read_text()
V1_PARTITION = (HERE / "schema_v1_partition.sql").read_text()
DAY_US = 86_400 * 1_000_000


def build_v1_store(path: Path) -> None:
    """The file querator's schema version 1 made, with :data:`v1.ITEMS` in it."""
    now = int(time.time() * 1_000_000)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode = WAL")  # as every querator store is
        conn.executescript(V1_SCHEMA)
        for name, dead, partitions in [
            (v1.DEAD_QUEUE, None, 1),
            (v1.QUEUE, v1.DEAD_QUEUE, v1.PARTITIONS),
        ]:
            cur = conn.execute(
                "INSERT INTO queues (name, lease_timeout, expire_timeout, max_attempts,"
                " dead_queue, reference, partitions, created_at)"
                " VALUES (?, 30, 86400, ?, ?, '', ?, ?)",
                (name, v1.MAX_ATTEMPTS, dead, partitions, now),
            )
            for n in range(partitions):
                conn.executescript(V1_PARTITION.format(table=f"q{cur.lastrowid}_p{n}"))
        for item in v1.ITEMS:
            conn.execute(
                f"INSERT INTO q2_p{item.partition} (version, available_at, attempts, expire_at,"
                " payload, kind, encoding, reference, headers, dedup_key, created_at)"
                " VALUES (1, ?, 0, ?, ?, '', '', '', '{}', ?, ?)",
                (now, now + DAY_US, item.payload, item.dedup_key, now),
            )
    conn.close()


def catalog(path: Path) -> list[tuple[str, str, str, str]]:
    """Every table and index of the file, with the SQL that makes it; a table by
    its columns and their order instead (``ALTER TABLE ADD COLUMN``, as migration
    4 adds ``priority``, spells a table's SQL differently from ``CREATE TABLE``)."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
        described = [
            (kind, name, table, repr(conn.execute(f'PRAGMA table_info("{name}")').fetchall()))
            if kind == "table"
            else (kind, name, table, sql)
            for kind, name, table, sql in rows
        ]
    finally:
        conn.close()
    return sorted(described)


def store_version(path: Path) -> tuple[int, int]:
    conn = sqlite3.connect(path)
    try:
        row = conn.execute("SELECT version, requires FROM schema_version").fetchone()
    finally:
        conn.close()
    return int(row[0]), int(row[1])


@pytest.fixture
def fresh_catalog(tmp_path: Path) -> list[tuple[str, str, str, str]]:
    """The catalog of a fresh file with the old one's queues."""
    fresh = tmp_path / "fresh.db"
    v1.make_fresh_store(f"sqlite:///{fresh}")
    assert store_version(fresh) == (v1.NEWEST, 1)
    return catalog(fresh)


@pytest.fixture
def old(tmp_path: Path) -> Path:
    """A version 1 file."""
    path = tmp_path / "old.db"
    build_v1_store(path)
    return path


def test_versions_align_with_postgresql() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, v1.NEWEST + 1))


def test_an_old_file_opened_migrates_to_the_fresh_catalog_and_keeps_its_items(
    old: Path, fresh_catalog: list[tuple[str, str, str, str]]
) -> None:
    assert catalog(old) != fresh_catalog  # the comparison can tell them apart
    with Querator(f"sqlite:///{old}"):
        pass
    assert catalog(old) == fresh_catalog
    assert store_version(old) == (v1.NEWEST, 1)
    v1.check_items_work(f"sqlite:///{old}")


def test_processes_opening_an_old_file_at_once_migrate_it_once(
    old: Path, fresh_catalog: list[tuple[str, str, str, str]], tmp_path: Path
) -> None:
    holder = sqlite3.connect(old, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # the write lock: both openers queue up on it
        openers = v1.start_openers(f"sqlite:///{old}", 2, tmp_path)
        v1.wait_ready(openers)
        holder.execute("COMMIT")
    finally:
        holder.close()
    outputs = v1.finish_openers(openers)
    assert sum(text.count(v1.MIGRATED) for text in outputs) == 1, outputs
    assert catalog(old) == fresh_catalog


def test_querator_migrate_lists_pending_migrations_then_applies_them(
    old: Path, fresh_catalog: list[tuple[str, str, str, str]]
) -> None:
    url = f"sqlite:///{old}"
    before = catalog(old)
    dry = v1.migrate_cli(url, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "schema version 1" in dry.stdout and "dry run, nothing changed" in dry.stdout
    assert "  2  dedup keys compare by code point" in dry.stdout
    assert catalog(old) == before

    done = v1.migrate_cli(url)
    assert done.returncode == 0, done.stderr
    assert f"migrated to schema version {v1.NEWEST}" in done.stdout
    assert catalog(old) == fresh_catalog
    v1.check_items_work(url)

    missing = v1.migrate_cli(f"sqlite:///{old.parent / 'typo.db'}")
    assert missing.returncode == 1 and "no store at" in missing.stderr
    assert not (old.parent / "typo.db").exists()


def test_a_file_from_a_newer_querator_is_refused_naming_both_versions(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    with Querator(f"sqlite:///{path}"):
        pass
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE schema_version SET version = 7, requires = 7")
    conn.close()

    with pytest.raises(SchemaTooNew) as refused:
        Querator(f"sqlite:///{path}")
    assert (refused.value.store_version, refused.value.known_version) == (7, v1.NEWEST)
    assert "schema version 7" in str(refused.value) and f"up to {v1.NEWEST}" in str(refused.value)


def test_migration_3_counts_expiry_from_availability_and_keeps_dead_letters(old: Path) -> None:
    now = int(time.time() * 1_000_000)
    with sqlite3.connect(old) as conn:
        conn.execute("UPDATE queues SET expire_timeout = 604800 WHERE id = 1")  # the default
        conn.execute(
            "INSERT INTO q2_p0 (version, available_at, attempts, expire_at, payload, kind,"
            " encoding, reference, headers, created_at)"
            " VALUES (1, ?, 0, ?, ?, '', '', '', '{}', ?)",
            (now + 10 * DAY_US, now + DAY_US, b"scheduled", now),
        )
        conn.execute(
            "INSERT INTO q1_p0 (version, available_at, attempts, expire_at, payload, kind,"
            " encoding, reference, headers, source_id, created_at)"
            " VALUES (1, ?, 0, ?, ?, '', '', '', '{}', '2.0.99', ?)",
            (now, now + 7 * DAY_US, b"dead letter", now),
        )
    conn.close()
    with Querator(f"sqlite:///{old}") as q:
        [scheduled] = [i for i in q.list_items(v1.QUEUE) if i.payload == b"scheduled"]
        assert scheduled.expire_at - scheduled.available_at == timedelta(days=1)
        [letter] = q.list_items(v1.DEAD_QUEUE)
        assert letter.expire_at == KEPT
