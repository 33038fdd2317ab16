"""The connection a client keeps between calls (``postgres/pooled.py`` ``Kept``):
calls that wait for the pool are not starved by it, closing the client
returns it (the pool closes with nothing checked out), and one the server
terminates costs at most one call (Unavailable) and no item."""

from __future__ import annotations

import anyio
import psycopg
import pytest

from querator import AsyncQuerator, Item, QueueSettings
from querator.errors import RequestTimeout, Unavailable
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


def _kept_pid(q: AsyncQuerator) -> int:
    """The backend pid of the connection ``q`` keeps between calls."""
    backend = q._backend
    assert isinstance(backend, PostgresBackend)
    conn = backend._parts.kept.conn
    assert conn is not None and not conn.closed
    return int(conn.info.backend_pid)


async def _drain(q: AsyncQuerator, wanted: set[bytes]) -> set[bytes]:
    """Lease and complete until every payload of ``wanted`` came (30 s at most)."""
    delivered: set[bytes] = set()
    with anyio.move_on_after(30):
        while not wanted <= delivered:
            try:
                got = await q.lease("cut", client_id="drain", batch_size=50, timeout=2)
            except RequestTimeout:
                continue
            await q.complete("cut", got)
            delivered |= {leased.payload for leased in got}
    return delivered


@pytest.mark.parametrize("call", ["lease", "complete", "produce", "lease_completing"])
async def test_a_kept_connection_the_server_terminates_loses_no_item(
    call: str, pg_schema_url: str, pg_dsn: str
) -> None:
    """pg_terminate_backend of the kept connection: the next call succeeds on
    another connection or raises Unavailable (never a raw driver error), the
    calls after it work, and every item produced is delivered."""
    async with AsyncQuerator(pg_schema_url) as q:
        await q.create_queue("cut", QueueSettings(lease_timeout=1))
        sent = {f"item-{n}".encode() for n in range(10)}
        await q.produce("cut", [Item(payload=p) for p in sorted(sent)])
        held = await q.lease("cut", client_id="a", batch_size=3)
        delivered: set[bytes] = set()
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (_kept_pid(q),))
        try:
            if call in ("lease", "lease_completing"):
                done = held if call == "lease_completing" else []
                delivered |= {leased.payload for leased in done}  # leased once: delivered
                more = await q.lease("cut", client_id="a", batch_size=3, complete=done)
                await q.complete("cut", more)
                delivered |= {leased.payload for leased in more}
            elif call == "complete":
                await q.complete("cut", held)
                delivered |= {leased.payload for leased in held}
            else:
                await q.produce("cut", [Item(payload=b"late")])
                sent.add(b"late")
        except Unavailable:
            pass  # its outcome unknown: an item not completed comes back when its lease ends
        delivered |= await _drain(q, sent)
        assert sent <= delivered
