"""Client CPU per item of lease + complete: querator's clients against the plain loop.

``python -m benchmarks.client_cost [URL] [--items N] [--batches 1,100]`` fills a
queue untimed, then drains it with lease + complete at each batch size and
prints, per client, the CPU time of the whole process (every thread: the sync
client's loop thread counts) divided by the items drained, in µs, and the
ratio to the plain loop of the same kind (``fused_*``: each lease completes
the previous batch, ``lease(..., complete=...)``): the sync ``Querator`` against a
plain sync psycopg ``FOR UPDATE SKIP LOCKED`` loop on one connection, the
``AsyncQuerator`` against the same loop on one async psycopg connection. The
plain loop's SQL is :mod:`benchmarks.systems.plain`'s. CPU time, not wall time:
the machine is shared, and the client's own cost is what this measures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql

from benchmarks.systems.plain import COMPLETE, INSERT, LEASE
from querator import AsyncQuerator, Item, Leased, Querator

DSN = os.environ.get("QUERATOR_BENCH_DSN", "postgresql://root@127.0.0.1:5432/test")


@contextmanager
def _cpu(result: dict[str, float], key: str, items: Callable[[], int]) -> Iterator[None]:
    began = time.process_time()
    yield
    spent = time.process_time() - began
    result[key] = round(spent / max(1, items()) * 1e6, 2)


def _plain_table(conn: psycopg.Connection[Any], name: str) -> str:
    """A fresh copy of the plain loop's table in its own schema."""
    conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(name)))
    conn.execute(
        "CREATE TABLE jobs (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
        " available_at timestamptz NOT NULL DEFAULT now(),"
        " attempts integer NOT NULL DEFAULT 0, payload bytea NOT NULL)"
    )
    conn.execute("CREATE INDEX jobs_available ON jobs (available_at, id)")
    return name


def plain_sync(dsn: str, items: int, batch: int) -> float:
    """µs of CPU per item of the plain sync loop."""
    out: dict[str, float] = {}
    name = f"cc_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        _plain_table(conn, name)
        try:
            for start in range(0, items, 1000):
                conn.execute(INSERT, ([b"x" * 64] * min(1000, items - start),))
            done = 0
            with _cpu(out, "us", lambda: done):
                while rows := conn.execute(LEASE, (batch,)).fetchall():
                    conn.execute(COMPLETE, ([r[0] for r in rows],))
                    done += len(rows)
        finally:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))
    return out["us"]


async def plain_async(dsn: str, items: int, batch: int) -> float:
    """µs of CPU per item of the plain async loop."""
    out: dict[str, float] = {}
    name = f"cc_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as setup:
        _plain_table(setup, name)
        for start in range(0, items, 1000):
            setup.execute(INSERT, ([b"x" * 64] * min(1000, items - start),))
    try:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(name)))
            done = 0
            with _cpu(out, "us", lambda: done):
                while True:
                    rows = await (await conn.execute(LEASE, (batch,))).fetchall()
                    if not rows:
                        break
                    await conn.execute(COMPLETE, ([r[0] for r in rows],))
                    done += len(rows)
    finally:
        with psycopg.connect(dsn, autocommit=True) as setup:
            setup.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))
    return out["us"]


def querator_sync(dsn: str, items: int, batch: int, fused: bool = False) -> float:
    """µs of CPU per item of ``Querator`` (its loop thread included); ``fused``:
    each lease completes the previous batch (``lease(..., complete=...)``)."""
    out: dict[str, float] = {}
    queue = f"cc-{uuid.uuid4().hex[:8]}"
    with Querator(dsn) as q:
        q.create_queue(queue)
        try:
            for start in range(0, items, 1000):
                q.produce(queue, [Item(payload=b"x" * 64)] * min(1000, items - start))
            done = 0
            leased: list[Leased] = []
            with _cpu(out, "us", lambda: done):
                while True:
                    held = leased if fused else []
                    try:
                        leased = q.lease(queue, client_id="cc", batch_size=batch, complete=held)
                    except Exception:  # RequestTimeout: drained
                        break
                    if not fused:
                        q.complete(queue, leased)
                    done += len(leased)
        finally:
            q.delete_queue(queue, force=True)
    return out["us"]


async def querator_async(dsn: str, items: int, batch: int, fused: bool = False) -> float:
    """µs of CPU per item of ``AsyncQuerator`` (``fused``: as :func:`querator_sync`)."""
    out: dict[str, float] = {}
    queue = f"cc-{uuid.uuid4().hex[:8]}"
    async with AsyncQuerator(dsn) as q:
        await q.create_queue(queue)
        try:
            for start in range(0, items, 1000):
                await q.produce(queue, [Item(payload=b"x" * 64)] * min(1000, items - start))
            done = 0
            leased: list[Leased] = []
            with _cpu(out, "us", lambda: done):
                while True:
                    held = leased if fused else []
                    try:
                        leased = await q.lease(
                            queue, client_id="cc", batch_size=batch, complete=held
                        )
                    except Exception:  # RequestTimeout: drained
                        break
                    if not fused:
                        await q.complete(queue, leased)
                    done += len(leased)
        finally:
            await q.delete_queue(queue, force=True)
    return out["us"]


def measure(dsn: str, items: int, batches: list[int]) -> list[dict[str, Any]]:
    """One row per batch size: µs per item of each client and the ratios."""
    table = []
    for batch in batches:
        count = items if batch > 1 else max(200, items // 10)
        row: dict[str, Any] = {"batch": batch, "items": count}
        row["plain_sync"] = plain_sync(dsn, count, batch)
        row["querator_sync"] = querator_sync(dsn, count, batch)
        row["plain_async"] = asyncio.run(plain_async(dsn, count, batch))
        row["querator_async"] = asyncio.run(querator_async(dsn, count, batch))
        row["fused_sync"] = querator_sync(dsn, count, batch, fused=True)
        row["fused_async"] = asyncio.run(querator_async(dsn, count, batch, fused=True))
        for kind in ("sync", "async"):
            plain = row[f"plain_{kind}"]
            row[f"{kind}_ratio"] = round(row[f"querator_{kind}"] / plain, 2)
            row[f"fused_{kind}_ratio"] = round(row[f"fused_{kind}"] / plain, 2)
        table.append(row)
    return table


def main(argv: list[str] | None = None) -> None:
    """Print one JSON line per batch size."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.client_cost", description=__doc__)
    parser.add_argument("url", nargs="?", default=DSN)
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--batches", default="1,100")
    args = parser.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    for row in measure(args.url, args.items, batches):
        print(json.dumps(row))


if __name__ == "__main__":
    main()
