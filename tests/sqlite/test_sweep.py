"""The dead-letter sweep on SQLite reads what it moves, not the backlog."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from polling import wait_for

from querator import Item, Querator, QueueSettings
from querator.queue.backends.sqlite import statements as sql

EXHAUSTED = 3


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "q.db"


@pytest.fixture
def client(path: Path) -> Iterator[Querator]:
    with Querator(f"sqlite:///{path}", maintenance_interval=3600) as client:
        yield client


def _steps(path: Path, query: str, params: tuple[int, ...]) -> int:
    """SQLite virtual machine instructions ``query`` takes (counted every 10)."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn = sqlite3.connect(path)
    try:
        conn.set_progress_handler(count, 10)
        conn.execute(query, params).fetchall()
    finally:
        conn.close()
    return steps


def test_sweep_work_does_not_grow_with_the_backlog(client: Querator, path: Path) -> None:
    client.create_queue("swept", QueueSettings(lease_timeout=0.2, max_attempts=1))
    client.produce("swept", [Item(payload=b"spent") for _ in range(EXHAUSTED)])
    spent = client.lease("swept", client_id="w", batch_size=EXHAUSTED, timeout=1)
    assert len(spent) == EXHAUSTED
    # their only lease runs out: due again, attempts used up, the sweep's to move
    wait_for(lambda: client.stats("swept").leased == 0, message="the leases to run out")
    queue_id = client.get_queue("swept").queue_id
    query = sql.dead_due(queue_id, 0)
    params = (int(time.time() * 1_000_000) + 1_000_000, sql.attempts_bound(1), 1000)

    work = []
    for _ in range(2):
        for _ in range(2):
            client.produce("swept", [Item(payload=b"fresh") for _ in range(1000)])
        work.append(_steps(path, query, params))
    # 2,000 then 4,000 fresh due items: a scan of the due items doubles its work
    assert work[1] < 1.2 * work[0], work

    assert client.run_maintenance() == EXHAUSTED
    assert client.stats("swept").total == 4000


def _sweep_index_names(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index'"
            " AND name LIKE '%\\_sweep' ESCAPE '\\'"
        ).fetchall()
    finally:
        conn.close()
    return {r[0] for r in rows}


def test_opening_gives_older_partitions_the_sweep_index_names(client: Querator, path: Path) -> None:
    client.create_queue("older", QueueSettings(partitions=2))
    queue_id = client.get_queue("older").queue_id
    expected = {f"q{queue_id}_p{n}_sweep" for n in (0, 1)}
    assert expected <= _sweep_index_names(path)
    client.close()
    conn = sqlite3.connect(path)  # as a file written before them, and before versions
    for index in expected:
        conn.execute(f"DROP INDEX {index}")
    conn.execute("DROP TABLE schema_version")
    conn.commit()
    conn.close()
    assert not expected & _sweep_index_names(path)

    with Querator(f"sqlite:///{path}"):
        assert expected <= _sweep_index_names(path)
