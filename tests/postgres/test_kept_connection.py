"""The connection a client keeps between calls (``postgres/pooled.py`` ``Kept``):
calls that wait for the pool are not starved by it, and closing the client
returns it (the pool closes with nothing checked out)."""

from __future__ import annotations

import anyio
import pytest

from querator import AsyncQuerator, Item
from querator.queue.backends.postgres.backend import PostgresBackend

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_calls_waiting_for_a_one_connection_pool_all_get_it(pg_schema_url: str) -> None:
    """With one pooled connection, a call that ends while others wait hands it to
    them instead of keeping it: each call here would otherwise wait out the
    5 s pool timeout and fail Unavailable."""
    url = f"{pg_schema_url}&pool_max=1&pool_min=1&pool_timeout=5"
    async with AsyncQuerator(url) as q:
        await q.create_queue("kept")
        ids: list[str] = []

        async def produce(n: int) -> None:
            ids.extend(await q.produce("kept", [Item(payload=str(n).encode())]))

        async with anyio.create_task_group() as tg:
            for n in range(12):
                tg.start_soon(produce, n)
        assert len(ids) == 12
        leased = await q.lease("kept", client_id="c", batch_size=12)
        assert sorted(item.id for item in leased) == sorted(ids)
        await q.complete("kept", leased)
        assert (await q.stats("kept")).total == 0


async def test_close_returns_the_kept_connection(pg_schema_url: str) -> None:
    q = AsyncQuerator(f"{pg_schema_url}&pool_max=2")
    async with q:
        await q.create_queue("kept")
        await q.produce("kept", [Item(payload=b"a")])
        backend = q._backend
        assert isinstance(backend, PostgresBackend)
        kept = backend._parts.kept
        assert kept.conn is not None  # the last call's connection, kept
        pool = backend._pool
        assert pool is not None
        assert pool.get_stats()["pool_size"] - pool.get_stats()["pool_available"] == 1
    assert kept.conn is None
    assert pool.closed
