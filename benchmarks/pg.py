"""The PostgreSQL side of the harness: throwaway databases and server facts."""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from benchmarks.config import db_prefix, server_dsn


def with_database(dsn: str, database: str) -> str:
    """``dsn`` (a URL) pointing at another database."""
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{database}"))


def admin() -> psycopg.Connection[Any]:
    """An autocommit connection to the run's home database."""
    return psycopg.connect(server_dsn(), autocommit=True)


LOCK_CLASS = 0x71626368
"""The first key of the advisory locks that mark throwaway databases in use."""


def _lock_key(name: str) -> int:
    """The second key of ``name``'s advisory lock (a signed 32-bit digest)."""
    digest = int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big")
    return digest - 2**32 if digest >= 2**31 else digest


@contextmanager
def throwaway_database(label: str) -> Iterator[str]:
    """Create a fresh database for one system; yields its DSN; drops it afterwards.

    While it exists, a session of the home database holds an advisory lock named
    after it (taken before the database is created): ``python -m benchmarks
    clean`` drops only databases whose lock is free, so never a running one's.
    """
    name = f"{db_prefix()}{label}_{os.getpid()}_{secrets.token_hex(3)}"
    with admin() as holder:
        holder.execute("SELECT pg_advisory_lock(%s, %s)", (LOCK_CLASS, _lock_key(name)))
        with admin() as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield with_database(server_dsn(), name)
        finally:
            drop_database(name)


def drop_database(name: str) -> None:
    """Drop a database, disconnecting whoever is still in it."""
    with admin() as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def vacuum(dsn: str) -> None:
    """``VACUUM (ANALYZE)`` a whole database, as autovacuum would soon do anyway."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE)")


def database_of(dsn: str) -> str:
    """The database name of a URL DSN."""
    return urlsplit(dsn).path.lstrip("/")


def server_facts() -> dict[str, str]:
    """Version and the settings that shape the figures."""
    names = ("server_version", "shared_buffers", "synchronous_commit", "fsync", "max_connections")
    with admin() as conn:
        facts = {
            n: str(_one(conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(n))))) for n in names
        }
    return facts


def transactions(database: str) -> int:
    """Committed plus rolled-back transactions of ``database`` so far (cumulative stats)."""
    with admin() as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s",
            (database,),
        ).fetchone()
    return int(row[0]) if row else 0


def _one(cur: psycopg.Cursor[Any]) -> Any:
    row = cur.fetchone()
    return None if row is None else row[0]


def throwaway_databases() -> list[str]:
    """The databases named with this run's prefix (:func:`~benchmarks.config.db_prefix`)."""
    with admin() as conn:
        rows = conn.execute(
            "SELECT datname FROM pg_database WHERE starts_with(datname, %s) ORDER BY datname",
            (db_prefix(),),
        ).fetchall()
    return [r[0] for r in rows]


def leftover_databases() -> list[str]:
    """Throwaway databases whose run is gone (their advisory lock is free)."""
    left = []
    with admin() as conn:
        for name in throwaway_databases():
            key = (LOCK_CLASS, _lock_key(name))
            if _one(conn.execute("SELECT pg_try_advisory_lock(%s, %s)", key)):
                conn.execute("SELECT pg_advisory_unlock(%s, %s)", key)
                left.append(name)
    return left


def drop_leftovers() -> list[str]:
    """Drop the throwaway databases whose run is gone, each while holding its lock
    (so a run cannot start using the name meanwhile); their names."""
    dropped = []
    with admin() as conn:
        for name in throwaway_databases():
            key = (LOCK_CLASS, _lock_key(name))
            if not _one(conn.execute("SELECT pg_try_advisory_lock(%s, %s)", key)):
                continue  # a running benchmark holds it
            try:
                drop_database(name)
                dropped.append(name)
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s, %s)", key)
    return dropped


def server_log_path() -> str | None:
    """The file the server writes its log to, when this process can read it.

    With ``logging_collector`` on, ``pg_current_logfile()`` names it (relative
    to the data directory); otherwise the log is the server's stderr, which a
    backend inherits: ``/proc/<backend pid>/fd/2`` (needs the same machine
    and enough privileges).
    """
    with admin() as conn:
        current = _one(conn.execute("SELECT pg_current_logfile()"))
        if current:
            data = _one(conn.execute("SHOW data_directory"))
            path = current if current.startswith("/") else f"{data}/{current}"
        else:
            pid = _one(conn.execute("SELECT pg_backend_pid()"))
            try:
                path = os.readlink(f"/proc/{pid}/fd/2")
            except OSError:
                return None
    return path if os.path.isfile(path) and os.access(path, os.R_OK) else None


def log_statements(database: str, on: bool) -> None:
    """Make new sessions of ``database`` log every statement (or stop)."""
    value = sql.SQL("'all'") if on else sql.SQL("DEFAULT")
    with admin() as conn:
        conn.execute(
            sql.SQL("ALTER DATABASE {} SET log_statement = {}").format(
                sql.Identifier(database), value
            )
        )


def count_logged_statements(path: str, database: str, start: int, end: int) -> int:
    """Statements of ``database`` logged between two byte offsets of the server log.

    Counts ``LOG:  statement:`` (simple protocol) and ``LOG:  execute …:``
    (extended protocol) lines whose prefix names ``@database``.
    """
    marker = f"@{database} "
    count = 0
    with open(path, "rb") as log:
        log.seek(start)
        for raw in log.read(max(0, end - start)).splitlines():
            line = raw.decode("utf-8", "replace")
            if marker in line and ("LOG:  statement: " in line or "LOG:  execute " in line):
                count += 1
    return count
