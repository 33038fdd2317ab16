"""The HTTP API against the library, in one run on one machine.

``python -m benchmarks.http_api [--items 20000] [--samples 300] [--idle 1000]``

1. *drain*: 4 consumer processes lease (batch 100) and complete until the queue
   is empty, once with the library's ``Querator`` on the store and once with
   ``querator.http.Querator`` through a ``querator serve`` process on that store;
2. *produce -> lease*: one waiting consumer; single items produced one at a
   time; the time from the produce call to the consumer holding the item
   (p50, p95), through HTTP and with the library;
3. *idle long polls*: N concurrent ``queue.lease`` long polls held by the
   server on an empty queue: transactions per second the database saw
   meanwhile (``pg_stat_database``), and the server's RSS; then N items are
   produced and every poll must get one.

Every case runs in a throwaway database. The table is printed and the figures
written to ``benchmarks/results/http-<time>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import queue as stdlib_queue
import secrets
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from benchmarks.pg import database_of, throwaway_database, transactions
from querator import Item, Querator
from querator.errors import RequestTimeout
from querator.http import Querator as HttpQuerator

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
CONSUMERS = 4
BATCH = 100
BASELINE = 20.0
"""Seconds the idle server is watched before any poll (its own maintenance)."""
SETTLE = 15.0
"""Seconds the idle polls get to arrive and settle before the window opens."""
WINDOW = 62.0
"""Seconds of the idle window: longer than the library's 60 s safety re-look of a
waiting lease, so its cost is counted."""


@contextmanager
def server(dsn: str, workers: int = 1) -> Iterator[tuple[str, int]]:
    """A ``querator serve --workers N`` on ``dsn``: its URL and (main) pid."""
    # no cap per client address: the idle case holds 1,000 connections from one
    command = [sys.executable, "-m", "querator.cli", "serve", "--url", dsn, "--port", "0",
               "--log-level", "warning", "--workers", str(workers),
               "--max-client-connections", "0"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip().rsplit(" ", 1)[-1]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _client(kind: str, url: str) -> Any:
    return HttpQuerator(url) if kind == "http" else Querator(url)


def _consume(kind: str, url: str, name: str, ready: Any, go: Any, out: Any) -> None:
    """One consumer process: lease and complete until a long poll finds nothing."""
    with _client(kind, url) as q:
        ready.put(os.getpid())
        go.wait()
        started, count = time.monotonic(), 0
        while True:
            try:
                batch = q.lease(name, client_id=f"c{os.getpid()}", batch_size=BATCH, timeout=0.5)
            except RequestTimeout:
                break
            q.complete(name, batch)
            count += len(batch)
            ended = time.monotonic()
        out.put((started, ended if count else started, count))


def drain(kind: str, url: str, store: str, items: int) -> float:
    """Items per second drained by 4 consumer processes at batch 100."""
    name = f"drain-{kind}-{secrets.token_hex(4)}"
    with Querator(store) as q:
        q.create_queue(name)
        for _ in range(items // 1000):
            q.produce(name, [Item(payload=b"x" * 64) for _ in range(1000)])
    ctx = multiprocessing.get_context("spawn")
    ready, out, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [
        ctx.Process(target=_consume, args=(kind, url, name, ready, go, out))
        for _ in range(CONSUMERS)
    ]
    for proc in procs:
        proc.start()
    for _ in procs:
        ready.get(timeout=60)
    go.set()
    results = [out.get(timeout=300) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    assert sum(r[2] for r in results) == items, results
    last = max(r[1] for r in results)  # the end of the last batch, before the empty poll
    return items / (last - min(r[0] for r in results))


def produce_to_lease(kind: str, url: str, samples: int) -> tuple[float, float]:
    """p50 and p95 (ms) from a produce call to the waiting consumer holding the item."""
    name = f"latency-{kind}-{secrets.token_hex(4)}"
    got: stdlib_queue.Queue[float] = stdlib_queue.Queue()
    with _client(kind, url) as producer, _client(kind, url) as consumer:
        producer.create_queue(name)

        def consume() -> None:
            for _ in range(samples):
                [item] = consumer.lease(name, client_id="waiter", timeout=30)
                got.put(time.perf_counter())
                consumer.complete(name, [item])

        thread = threading.Thread(target=consume)
        thread.start()
        delays = []
        for _ in range(samples):
            time.sleep(0.01)  # the consumer is back in its long poll
            sent = time.perf_counter()
            producer.produce(name, [Item(payload=b"x")])
            delays.append((got.get(timeout=30) - sent) * 1000)
        thread.join()
    cuts = statistics.quantiles(delays, n=20)
    return statistics.median(delays), cuts[18]


async def _idle_polls(url: str, count: int, database: str, pid: int) -> dict[str, float]:
    name = "idle"
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:
        await http.post("/v1/queues.create", json={"queue_name": name})
        rss_before = _rss_mib(pid)
        before, started = transactions(database), time.monotonic()
        await asyncio.sleep(BASELINE)
        baseline = (transactions(database) - before) / (time.monotonic() - started)
        body = {"queue_name": name, "client_id": "idle", "batch_size": 1, "request_timeout": "15m"}
        polls = [asyncio.create_task(http.post("/v1/queue.lease", json=body)) for _ in range(count)]
        await asyncio.sleep(SETTLE)  # every poll is now waiting in the server
        before, started = transactions(database), time.monotonic()
        await asyncio.sleep(WINDOW)
        rate = (transactions(database) - before) / (time.monotonic() - started)
        rss = _rss_mib(pid)
        items = [{"utf8": "wake"}] * 1000
        for at in range(0, count, 1000):
            produce = {"queue_name": name, "request_timeout": "10s", "items": items[: count - at]}
            await http.post("/v1/queue.produce", json=produce)
        answers = await asyncio.gather(*polls)
    served = sum(1 for answer in answers if answer.status_code == 200)
    assert served == count, f"{served} of {count} long polls got an item"
    return {
        "transactions_per_s": rate,
        "baseline_transactions_per_s": baseline,
        "rss_mib": rss,
        "rss_mib_before": rss_before,
    }


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--idle", type=int, default=1_000, help="0: skip the idle case")
    parser.add_argument("--workers", type=int, default=2, help="server processes for the drain")
    options = parser.parse_args()
    figures: dict[str, Any] = {"when": datetime.now(UTC).isoformat(timespec="seconds")}
    figures["server_workers"] = options.workers
    with throwaway_database("http") as store:
        figures["drain_library"] = drain("library", store, store, options.items)
        with server(store) as (url, pid):
            figures["drain_http_1"] = drain("http", url, store, options.items)
        with server(store, options.workers) as (url, pid):
            figures["drain_http"] = drain("http", url, store, options.items)
    with throwaway_database("http") as store, server(store) as (url, pid):
        figures["latency_library_ms"] = produce_to_lease("library", store, options.samples)
        figures["latency_http_ms"] = produce_to_lease("http", url, options.samples)
    if options.idle:
        with throwaway_database("http_idle") as store, server(store) as (url, pid):
            figures["idle"] = asyncio.run(_idle_polls(url, options.idle, database_of(store), pid))
        figures["idle"]["clients"] = options.idle
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"http-{figures['when'].replace(':', '')}.json"
    path.write_text(json.dumps(figures, indent=2))
    print(table(figures))
    print(f"written to {path}")


def table(f: dict[str, Any]) -> str:
    """The Markdown table of one run."""
    ratio = f["drain_http"] / f["drain_library"]
    lib, http = f["latency_library_ms"], f["latency_http_ms"]
    rows = [
        "| case | through HTTP | library | ratio |",
        "|---|---|---|---|",
        f"| drain, batch 100 x 4 consumer processes, server --workers {f['server_workers']} "
        f"| {f['drain_http']:,.0f} items/s | {f['drain_library']:,.0f} items/s "
        f"| **{ratio:.2f}x** |",
        f"| same, server --workers 1 | {f['drain_http_1']:,.0f} items/s | "
        f"| {f['drain_http_1'] / f['drain_library']:.2f}x |",
        f"| produce -> lease, waiting consumer, p50 / p95 | {http[0]:.1f} / {http[1]:.1f} ms "
        f"| {lib[0]:.1f} / {lib[1]:.1f} ms | |",
    ]
    if "idle" in f:
        idle = f["idle"]
        rows += [
            f"| {idle['clients']:,} idle long polls: database transactions/s "
            f"(the server alone, no poll) | {idle['transactions_per_s']:.2f} "
            f"({idle['baseline_transactions_per_s']:.2f}) | | |",
            f"| same: server RSS (before the polls) | {idle['rss_mib']:.0f} MiB "
            f"({idle['rss_mib_before']:.0f} MiB) | | |",
        ]
    return "\n".join(rows)


if __name__ == "__main__":
    main()
