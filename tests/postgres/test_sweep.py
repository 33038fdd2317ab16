"""The dead-letter sweep on PostgreSQL reads what it moves, not the backlog."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from polling import wait_for
from psycopg import sql

from querator import Item, Querator, QueueSettings
from querator.queue.backends.postgres import statements as stmt

BACKLOG = 3000
EXHAUSTED = 3


@pytest.fixture
def client(pg_schema_url: str) -> Iterator[Querator]:
    with Querator(pg_schema_url, maintenance_interval=3600) as client:
        yield client


def _backlog_with_exhausted(client: Querator, name: str) -> None:
    """``BACKLOG`` fresh due items and ``EXHAUSTED`` whose only lease ran out."""
    client.create_queue(f"{name}-dead")
    settings = QueueSettings(lease_timeout=0.2, max_attempts=1, dead_queue=f"{name}-dead")
    client.create_queue(name, settings)
    client.produce(name, [Item(payload=b"spent") for _ in range(EXHAUSTED)])
    spent = client.lease(name, client_id="w", batch_size=EXHAUSTED, timeout=1)
    assert len(spent) == EXHAUSTED
    # their only lease runs out: due again, attempts used up, the sweep's to move
    wait_for(lambda: client.stats(name).leased == 0, message="the leases to run out")
    for _ in range(BACKLOG // 1000):
        client.produce(name, [Item(payload=b"fresh") for _ in range(1000)])


def _rows_read(plan: dict[str, Any], table: str) -> int:
    """Rows the plan's nodes on ``table`` produced or filtered out, all loops."""
    own = 0
    if plan.get("Relation Name") == table:
        produced = plan.get("Actual Rows", 0) + plan.get("Rows Removed by Filter", 0)
        own = produced * plan.get("Actual Loops", 1)
    return own + sum(_rows_read(child, table) for child in plan.get("Plans", []))


def test_sweep_reads_the_items_it_moves_not_the_backlog(
    client: Querator, pg_dsn: str, pg_schema: str
) -> None:
    _backlog_with_exhausted(client, "swept")
    queue_id = client.get_queue("swept").queue_id
    names = stmt.Names(pg_schema)
    due = stmt.DUE_FOUND.format(source=names.partition(queue_id, 0))
    explain = sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) ") + due
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(stmt.SESSION_SETTINGS)
        params = {"max_attempts": 1, "exhausted": "x", "expired": "y", "limit": 1000, "now": None}
        row = conn.execute(explain, params).fetchone()
        conn.rollback()  # the statement locks what it selects
    assert row is not None
    plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
    read = _rows_read(plan[0]["Plan"], f"q{queue_id}_p0")
    assert EXHAUSTED <= read <= 10 * EXHAUSTED, f"read {read} rows of {BACKLOG + EXHAUSTED}"

    assert client.run_maintenance() == EXHAUSTED
    assert client.stats("swept-dead").total == EXHAUSTED
    assert client.stats("swept").total == BACKLOG


def _sweep_index_names(dsn: str, schema: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = %s"
            " AND indexname LIKE '%%\\_sweep'",
            (schema,),
        ).fetchall()
    return {r[0] for r in rows}


def test_opening_gives_older_partitions_the_sweep_index_names(
    client: Querator, pg_dsn: str, pg_schema: str, pg_schema_url: str
) -> None:
    client.create_queue("older", QueueSettings(partitions=2, max_attempts=1))
    queue_id = client.get_queue("older").queue_id
    made = _sweep_index_names(pg_dsn, pg_schema)
    expected = {f"q{queue_id}_p{n}_sweep" for n in (0, 1)}
    assert expected <= made
    # as a store made before them, which also predates recorded schema versions
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for index in expected:
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(pg_schema, index)))
        conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(pg_schema, "schema_version")))
    assert not expected & _sweep_index_names(pg_dsn, pg_schema)

    with Querator(pg_schema_url) as reopened:
        assert expected <= _sweep_index_names(pg_dsn, pg_schema)
        reopened.produce(
            "older",
            [Item(payload=b"x")],
        )
        assert reopened.run_maintenance() == 0
        assert reopened.stats("older").total == 1
