"""The raw-sqlite3 hot paths: row layout and statements cached per partition table."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from querator import Item, Querator
from querator.errors import Conflict, ConflictReason, QueueNotFound
from querator.queue.backends.sqlite.rows import ItemRow, QueueRow
from querator.queue.backends.sqlite.schema import partition_table, queues


def test_rows_name_the_columns_of_their_tables() -> None:
    # leased_at is written by leases and read by completes only (lease-to-complete)
    assert {*ItemRow._fields, "leased_at"} == {c.name for c in partition_table(1, 0).columns}
    assert set(QueueRow._fields) == {c.name for c in queues.columns}


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'q.db'}"


@pytest.fixture
def clients(url: str) -> Iterator[tuple[Querator, Querator]]:
    with Querator(url, cache_ttl=3600) as mine, Querator(url) as other:
        yield mine, other


def test_queue_recreated_by_another_client_never_reaches_the_old_table(
    clients: tuple[Querator, Querator],
) -> None:
    mine, other = clients
    mine.create_queue("jobs")
    mine.produce("jobs", [Item(payload=b"a"), Item(payload=b"b")])
    # no timeout: a waiting lease would start the wakeup listener, whose start
    # drops the cached info this test keeps stale
    held = mine.lease("jobs", client_id="w1", batch_size=1)
    # The other client drops the queue; this one still caches its info and the
    # statements on its connections name the dropped table.
    other.delete_queue("jobs", force=True)
    other.create_queue("jobs")
    other.produce("jobs", [Item(payload=b"new")])

    with pytest.raises(Conflict) as err:
        mine.complete("jobs", held)
    assert err.value.reasons == {held[0].id: ConflictReason.MISSING}
    with pytest.raises(QueueNotFound):
        mine.produce("jobs", [Item(payload=b"c")])
    with pytest.raises(QueueNotFound):
        mine.lease("jobs", client_id="w1", timeout=0)

    mine.get_queue("jobs")  # refreshes this client's cached info
    leased = mine.lease("jobs", client_id="w1", batch_size=5, timeout=1)
    assert [item.payload for item in leased] == [b"new"]
    mine.complete("jobs", leased)
    assert mine.stats("jobs").total == 0
