"""Driver errors are classified: retryable (Unavailable), the request's fault
(InvalidArgument) or the operator's (StoreFault), in one line of querator's own
words, and each reaches an HTTP client as the same class."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest
from psycopg import errors as pg_errors
from psycopg import sql

from querator import Querator
from querator.errors import InvalidArgument, QueratorError, StoreFault, Unavailable
from querator.http.status import INTERNAL_ERROR, error_of, error_reply
from querator.queue.backends.postgres.failures import classify as classify_pg
from querator.queue.backends.sqlite.failures import classify as classify_sqlite

RAW = 'raw server text: value "9223372036854775808"\nCONTEXT: SQL function'

PG_CASES: list[tuple[type[psycopg.Error], type[QueratorError], str]] = [
    (pg_errors.DiskFull, StoreFault, "disk full (SQLSTATE 53100)"),
    (pg_errors.InsufficientPrivilege, StoreFault, "insufficient privilege (SQLSTATE 42501)"),
    (pg_errors.DataCorrupted, StoreFault, "data corrupted (SQLSTATE XX001)"),
    (pg_errors.NumericValueOutOfRange, InvalidArgument, "(SQLSTATE 22003)"),
    (pg_errors.ProgramLimitExceeded, InvalidArgument, "(SQLSTATE 54000)"),
    (pg_errors.ReadOnlySqlTransaction, Unavailable, "(SQLSTATE 25006)"),
    (pg_errors.SerializationFailure, Unavailable, "(SQLSTATE 40001)"),
    (pg_errors.AdminShutdown, Unavailable, "(SQLSTATE 57P01)"),
    (pg_errors.TooManyConnections, Unavailable, "(SQLSTATE 53300)"),
    (pg_errors.LockNotAvailable, Unavailable, "(SQLSTATE 55P03)"),
]


CITUS_LOST: list[tuple[type[psycopg.Error], str]] = [
    (
        pg_errors.InternalError_,
        "SSL SYSCALL error: EOF detected\ninvalid socket\nCONTEXT:  while executing command on"
        " 127.0.0.1:5433",
    ),
    (pg_errors.InternalError_, "failure on connection marked as essential: 127.0.0.1:5433"),
    (pg_errors.IoError, "failed to COPY to shard 102011 on 127.0.0.1:5433"),
]
"""What a Citus 13.2 coordinator raised when a worker node restarted under load."""


@pytest.mark.parametrize(("driver", "text"), CITUS_LOST)
def test_a_citus_coordinator_losing_a_worker_mid_command_is_retryable(
    driver: type[psycopg.Error], text: str
) -> None:
    error = classify_pg(driver(text))
    assert type(error) is Unavailable and f"(SQLSTATE {driver.sqlstate})" in str(error)
    assert "\n" not in str(error) and "127.0.0.1" not in str(error)
    # the same words without Citus's context line, or another internal error, stay the operator's
    assert type(classify_pg(pg_errors.InternalError_("invalid socket"))) is StoreFault
    assert type(classify_pg(pg_errors.InternalError_("cache lookup failed"))) is StoreFault


@pytest.mark.parametrize(("driver", "expected", "words"), PG_CASES)
def test_postgresql_errors_are_classified_in_one_line(
    driver: type[psycopg.Error], expected: type[QueratorError], words: str
) -> None:
    error = classify_pg(driver(RAW))
    assert type(error) is expected
    assert words in str(error)
    assert "raw server text" not in str(error) and "\n" not in str(error)
    assert error.retryable is (expected is Unavailable)


def test_a_table_dropped_under_querator_is_the_operators_fault(
    pg_dsn: str, pg_schema: str, pg_schema_url: str
) -> None:
    with Querator(pg_schema_url) as q:
        q.create_queue("jobs")
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP TABLE {}.queues CASCADE").format(sql.Identifier(pg_schema)))
        with pytest.raises(StoreFault) as raised:
            q.list_queues()
    assert raised.value.code == "42P01"
    assert str(raised.value) == (
        "the store refused the call: PostgreSQL: undefined table (SQLSTATE 42P01);"
        " its operator must act"
    )


def _sqlite_error(tmp_path: Path, setup: str, statement: str) -> sqlite3.Error:
    """The error real SQLite raises for ``statement`` after ``setup``."""
    conn = sqlite3.connect(tmp_path / "probe.db", isolation_level=None)
    try:
        conn.executescript(setup)
        with pytest.raises(sqlite3.Error) as raised:
            conn.execute(statement)
        return raised.value
    finally:
        conn.close()


def test_a_full_sqlite_file_is_the_operators_fault(tmp_path: Path) -> None:
    exc = _sqlite_error(
        tmp_path,
        "CREATE TABLE t (b BLOB); PRAGMA max_page_count = 3;",
        "INSERT INTO t VALUES (zeroblob(100000))",
    )
    error = classify_sqlite(exc)
    assert isinstance(error, StoreFault) and error.code == "SQLITE_FULL"
    assert not error.retryable


def test_a_broken_sqlite_constraint_is_the_requests_fault(tmp_path: Path) -> None:
    exc = _sqlite_error(
        tmp_path, "CREATE TABLE t (n INTEGER NOT NULL);", "INSERT INTO t VALUES (NULL)"
    )
    error = classify_sqlite(exc)
    assert isinstance(error, InvalidArgument) and "SQLITE_CONSTRAINT" in error.rule


def test_a_store_fault_crosses_http_as_itself() -> None:
    reply = error_reply(StoreFault("PostgreSQL: disk full (SQLSTATE 53100)", "53100"))
    assert reply.code == INTERNAL_ERROR
    assert reply.message == "store failed; PostgreSQL: disk full (SQLSTATE 53100)"
    rebuilt = error_of(reply.code, reply)
    assert isinstance(rebuilt, StoreFault) and rebuilt.code == "53100"
    assert not rebuilt.retryable
