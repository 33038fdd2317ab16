"""Filling a store fast for a benchmark: items produced in bulk, then ``ANALYZE``.

The dashboard, ``attribute_search`` and ``retention_drain`` benchmarks fill
their stores with the layout's own items (``produce`` of what a start or an end
would write), far faster than running the code that writes them.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import anyio
import psycopg
from anyio.streams.memory import MemoryObjectReceiveStream
from psycopg import sql

from querator import AsyncQuerator, Item
from querator.queue.backends.namespaces import DEFAULT_SCHEMA
from querator.queue.backends.postgres.dsn import split_dsn

BATCH = 1_000
PARALLEL = 4
"""Produce calls in flight while filling."""


async def bulk_produce(
    aq: AsyncQuerator, queue: str, make: Callable[[int], list[Item]], start: int, size: int
) -> None:
    """Produce ``make(n)`` for ``n`` in ``start .. size-1`` into ``queue``, 1,000
    items a call, :data:`PARALLEL` calls in flight."""
    began = time.monotonic()
    send, receive = anyio.create_memory_object_stream[list[Item]](PARALLEL)

    async def producer(batches: MemoryObjectReceiveStream[list[Item]]) -> None:
        async with batches:
            async for items in batches:
                await aq.produce(queue, items)

    async with anyio.create_task_group() as group:
        for _ in range(PARALLEL):
            group.start_soon(producer, receive.clone())
        receive.close()
        async with send:
            pending: list[Item] = []
            for n in range(start, size):
                pending += make(n)
                if len(pending) > BATCH - 10:
                    await send.send(pending)
                    pending = []
                if n % 100_000 == 0 and n:
                    took = time.monotonic() - began
                    print(f"  {queue}: {n:,} ({took:.0f} s)", file=sys.stderr)
            if pending:
                await send.send(pending)


def analyze(url: str) -> None:
    """``ANALYZE`` the store's tables, as autovacuum soon does after a bulk load
    (before it, the planner has no statistics and the gauges no estimate)."""
    target = split_dsn(url, DEFAULT_SCHEMA)  # not ``public``
    schema = target.schema
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
        ).fetchall()
        for (table,) in tables:
            conn.execute(
                sql.SQL("ANALYZE {}.{}").format(sql.Identifier(schema), sql.Identifier(table))
            )
