"""Drain speed under churn: one queue filled and drained again and again.

``python -m benchmarks.churn [URL] [--cycles 20] [--items 5000] [--batch 100]``
pushes ``cycles`` fill/drain cycles through one queue of a sync ``Querator``
(fill untimed, at batch 1000; drain with lease + complete at ``batch``) and
prints each cycle's drain rate (items/s, wall clock) and the last cycle's
against the first: a table that bloats with dead rows drains slower each time.
``--storage`` first gives the queue's partition table the storage settings
job queues recommend for their hot table (:data:`STORAGE`) to measure them.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid

import psycopg
from psycopg import sql

from querator import Item, Querator
from querator.errors import RequestTimeout

STORAGE = (
    "fillfactor = 70, autovacuum_vacuum_scale_factor = 0.0,"
    " autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_insert_scale_factor = 0.0,"
    " autovacuum_vacuum_cost_delay = 0, autovacuum_analyze_scale_factor = 0.02"
)
"""Vacuum the table after a fixed number of dead rows (not a fraction of its
size), without throttling, and leave room on each page for updated rows."""

DSN = os.environ.get("QUERATOR_BENCH_DSN", "postgresql://root@127.0.0.1:5432/test")


def _tune(url: str, queue_id: int) -> None:
    with psycopg.connect(url.partition("?")[0], autocommit=True) as conn:
        table = sql.Identifier("querator", f"q{queue_id}_p0")
        conn.execute(sql.SQL("ALTER TABLE {} SET (" + STORAGE + ")").format(table))


def cycles(url: str, count: int, items: int, batch: int, storage: bool) -> list[float]:
    """The drain rate of each cycle, in items/s."""
    queue = f"churn-{uuid.uuid4().hex[:8]}"
    rates: list[float] = []
    with Querator(url) as q:
        info = q.create_queue(queue)
        if storage:
            _tune(url, info.queue_id)
        try:
            for _ in range(count):
                for start in range(0, items, 1000):
                    q.produce(queue, [Item(payload=b"x" * 64)] * min(1000, items - start))
                done = 0
                began = time.perf_counter()
                while True:
                    try:
                        leased = q.lease(queue, client_id="churn", batch_size=batch)
                    except RequestTimeout:
                        break
                    q.complete(queue, leased)
                    done += len(leased)
                rates.append(done / (time.perf_counter() - began))
        finally:
            q.delete_queue(queue, force=True)
    return rates


def main(argv: list[str] | None = None) -> None:
    """Print the rates and the last-to-first ratio as one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.churn", description=__doc__)
    parser.add_argument("url", nargs="?", default=DSN)
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--storage", action="store_true", help="apply STORAGE first")
    args = parser.parse_args(argv)
    rates = cycles(args.url, args.cycles, args.items, args.batch, args.storage)
    print(
        json.dumps(
            {
                "rates": [round(r) for r in rates],
                "first": round(rates[0]),
                "last": round(rates[-1]),
                "last_to_first": round(rates[-1] / rates[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
