"""The dashboard's pages with many runs stored (PostgreSQL).

``python -m benchmarks.dashboard_pages [--sizes 10000,1000000] [--looks 15] [--url DSN]``

The store is filled in bulk with what runs leave in it — each run's meta
record and run-index entries, and for an ended run its result record and the
entries of its final status, the ``running`` entries it left included (as the
engine writes them: no listing has pruned them yet) — produced 1,000 items a
call with the layout's own items, several calls at once. Of every 100 runs 90
completed, 5 failed, 1 was cancelled and 4 still run; five runs of a rare
workflow are the oldest. Started one second apart, newest last.

At each size a ``querator serve`` on the store answers GETs of each page
(no tokens: a loopback server on a store without one is open); the table has
the median and p95 of ``--looks`` requests per page, timed by the client
(server render plus loopback HTTP). The first request of each page is
timed apart (``first``): the runs page with ``status=running`` prunes the stale
``running`` entries it walks over then.

With ``--watchers N`` it then opens N live pages' event streams (as N
browsers would) and reads the database's transactions per second before and
while they are open (``pg_stat_database``, over ``--window`` seconds: use a
throwaway database, which nothing else uses), and how long every stream
takes to hear of a change.

Without ``--url`` the store is a throwaway database, dropped at the end;
with it, the store is kept, and a size it already holds is not filled again.
Figures go to ``benchmarks/results/dashboard-<time>.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx

from benchmarks.bulk_fill import analyze, bulk_produce
from benchmarks.http_api import server
from benchmarks.pg import throwaway_database, transactions
from querator import AsyncQuerator, Item, QueueSettings
from querator.workflows.keys import RESULTS_QUEUE, RESULTS_SETTINGS, meta_key, result_key
from querator.workflows.runs import RunStatus
from querator.workflows.stored import RunMeta, RunRecord, index_items, record_item

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
WORKFLOW = "bench.orders"
RARE = "bench.rare"
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
COUNT_KEY = "bench/filled"
ITEMS_KEY = "bench/queued"
WORK_QUEUE = "bench.work"
WORK_SETTINGS = QueueSettings(lease_timeout=30, expire_timeout=86_400 * 30, partitions=4)


def _status(n: int) -> RunStatus:
    """The status of the ``n``-th run (of every 100: 90 completed, 5 failed,
    1 cancelled, 4 running)."""
    r = n % 100
    return "completed" if r < 90 else "failed" if r < 95 else "cancelled" if r < 96 else "running"


def run_items(n: int) -> list[Item]:
    """What the ``n``-th run left in the results queue."""
    run_id = f"run-bench{n:012d}"
    started = EPOCH + timedelta(seconds=n)
    workflow = RARE if n < 5 else WORKFLOW
    meta = RunMeta(workflow=workflow, args=f"[{n}]", queue="bench.work", started_at=started)
    items = [record_item(meta_key(run_id), meta, run_id)]
    items += index_items(run_id, meta, "running", new=True)
    status = _status(n)
    if status != "running":
        record = RunRecord(
            ok=status == "completed",
            result=str(n) if status == "completed" else None,
            error=None,
            cancelled=status == "cancelled",
            finished_at=started + timedelta(seconds=0.5),
        )
        items.append(record_item(result_key(run_id), record, run_id))
        items += index_items(run_id, meta, status)
    return items


async def _filled(aq: AsyncQuerator, key: str) -> int:
    found = await aq.lookup(RESULTS_QUEUE, [key])
    return int(found[key].payload) if key in found else 0


async def _mark(aq: AsyncQuerator, key: str, size: int) -> None:
    counter = await aq.lookup(RESULTS_QUEUE, [key])
    if key in counter:
        await aq.delete_items(RESULTS_QUEUE, [counter[key].id])
    await aq.produce(RESULTS_QUEUE, [Item(payload=str(size).encode(), dedup_key=key)])


def queued_item(n: int) -> list[Item]:
    """The ``n``-th item waiting in the work queue (a JSON order of ~100 bytes)."""
    body = f'{{"order": {n}, "sku": "kettle-{n % 97}", "quantity": {1 + n % 5}}}'
    return [Item(payload=body.encode(), kind="bench.order")]


async def fill(url: str, size: int, items: int = 0) -> float:
    """Runs ``0 .. size-1`` stored and ``items`` items waiting in the work queue
    (those already there are kept); seconds taken."""
    began = time.monotonic()
    async with AsyncQuerator(url) as aq:
        await aq.create_queue(RESULTS_QUEUE, RESULTS_SETTINGS, exist_ok=True)
        await bulk_produce(aq, RESULTS_QUEUE, run_items, await _filled(aq, COUNT_KEY), size)
        await _mark(aq, COUNT_KEY, size)
        if items:
            await aq.create_queue(WORK_QUEUE, WORK_SETTINGS, exist_ok=True)
            await bulk_produce(aq, WORK_QUEUE, queued_item, await _filled(aq, ITEMS_KEY), items)
            await _mark(aq, ITEMS_KEY, items)
    return time.monotonic() - began


def pages(size: int, items: int) -> dict[str, str]:
    """The pages timed, by label."""
    newest = f"run-bench{size - 1:012d}"
    work = {
        f"queue {WORK_QUEUE}": f"/ui/queues/{WORK_QUEUE}",
        f"items of {WORK_QUEUE}, partition 3": f"/ui/queues/{WORK_QUEUE}/items?partition=3",
    }
    return {
        "runs (newest 50, counts)": "/ui/runs",
        "runs, page 2": f"/ui/runs?after=run-bench{size - 51:012d}",
        "runs ?status=failed": "/ui/runs?status=failed",
        "runs ?status=running": "/ui/runs?status=running",
        "runs ?workflow=rare (5 oldest)": f"/ui/runs?workflow={RARE}",
        "runs ?since=1h ago": "/ui/runs?since="
        + (EPOCH + timedelta(seconds=size - 3600)).strftime("%Y-%m-%dT%H:%M"),
        "runs ?until=middle": "/ui/runs?until="
        + (EPOCH + timedelta(seconds=size // 2)).strftime("%Y-%m-%dT%H:%M"),
        "runs ?id=prefix": f"/ui/runs?id=run-bench{size // 2:012d}"[:-2],
        "run detail": f"/ui/runs/{newest}",
        "queues": "/ui/queues",
        "queue querator.results": f"/ui/queues/{RESULTS_QUEUE}",
        "items of querator.results": f"/ui/queues/{RESULTS_QUEUE}/items",
        "workers": "/ui/workers",
        "runs sparklines (fragment)": "/ui/sparklines",
        "tasks": "/ui/tasks",
        "locks and rate limits": "/ui/locks",
        **(work if items else {}),
    }


def time_pages(url: str, size: int, items: int, looks: int) -> dict[str, dict[str, float]]:
    """Median and p95 (ms) of ``looks`` GETs of each page, and its first GET."""
    figures: dict[str, dict[str, float]] = {}
    with httpx.Client(base_url=url, timeout=120) as client:
        for label, path in pages(size, items).items():
            began = time.perf_counter()
            first = client.get(path)
            first_ms = (time.perf_counter() - began) * 1000
            assert first.status_code == 200, (path, first.status_code, first.text[:500])
            times = []
            for _ in range(looks):
                began = time.perf_counter()
                answer = client.get(path)
                times.append((time.perf_counter() - began) * 1000)
                assert answer.status_code == 200, (path, answer.status_code)
            times.sort()
            figures[label] = {
                "first": first_ms,
                "median": statistics.median(times),
                "p95": times[min(len(times) - 1, round(0.95 * (len(times) - 1)))],
            }
    return figures


@contextmanager
def store(url: str | None) -> Iterator[str]:
    if url is not None:
        yield url
        return
    with throwaway_database("dashboard") as dsn:
        yield dsn


async def _watchers(url: str, base: str, count: int, window: float) -> dict[str, float]:
    """``count`` live pages' event streams on the server at ``base``: the
    database's transactions per second with none open, then with all open and
    nothing changing, and how long until every stream got ``change`` after a
    run's record lands."""
    database = urlsplit(url).path.lstrip("/")
    ready, changed = anyio.Semaphore(0, max_value=count), anyio.Semaphore(0, max_value=count)

    async def stream(client: httpx.AsyncClient) -> None:
        seen_ready = False
        async with client.stream("GET", "/ui/events") as answer:
            async for line in answer.aiter_lines():
                if line == "event: ready" and not seen_ready:
                    seen_ready = True
                    ready.release()
                elif line == "event: change" and seen_ready:
                    changed.release()
                    return

    before = transactions(database)
    await anyio.sleep(window)
    idle = (transactions(database) - before) / window
    limits = httpx.Limits(max_connections=count + 10, max_keepalive_connections=count + 10)
    async with (
        httpx.AsyncClient(base_url=base, timeout=None, limits=limits) as client,
        anyio.create_task_group() as group,
    ):
        for _ in range(count):
            group.start_soon(stream, client)
        for _ in range(count):
            await ready.acquire()
        await anyio.sleep(2.0)  # the opening requests' own statements settle
        before = transactions(database)
        await anyio.sleep(window)
        watched = (transactions(database) - before) / window
        began = time.monotonic()
        async with AsyncQuerator(url) as aq:
            await aq.produce(RESULTS_QUEUE, [Item(payload=b"", dedup_key="bench/poke")])
        for _ in range(count):
            await changed.acquire()
        fanout = time.monotonic() - began
    return {"idle_tps": idle, "watched_tps": watched, "fanout_seconds": fanout}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dashboard_pages")
    parser.add_argument("--sizes", default="10000,1000000")
    parser.add_argument("--looks", type=int, default=15)
    parser.add_argument("--items", type=int, default=0, help="items waiting in a work queue")
    parser.add_argument("--watchers", type=int, default=0, help="live pages' streams to open")
    parser.add_argument("--window", type=float, default=20.0, help="seconds each rate is read over")
    parser.add_argument("--url", help="a store to fill and keep (default: a throwaway database)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    report: dict[str, Any] = {"sizes": {}, "looks": args.looks}
    with store(args.url) as url:
        for size in sizes:
            took = anyio.run(fill, url, size, args.items)
            analyze(url)
            print(f"{size:,} runs and {args.items:,} items stored ({took:.0f} s)", file=sys.stderr)
            with server(url) as (base, _pid):
                figures = time_pages(base, size, args.items, args.looks)
                watch = (
                    anyio.run(_watchers, url, base, args.watchers, args.window)
                    if args.watchers
                    else {}
                )
            report["sizes"][size] = {"fill_seconds": took, "pages": figures, "watchers": watch}
            if watch:
                print(
                    f"{args.watchers} live streams: {watch['idle_tps']:.1f} transactions/s "
                    f"before, {watch['watched_tps']:.1f}/s while open and idle; every "
                    f"stream got the change in {watch['fanout_seconds'] * 1000:.0f} ms"
                )
            for label, f in figures.items():
                print(
                    f"{size:>9,}  {label:<34} first {f['first']:8.1f} ms  "
                    f"median {f['median']:7.1f} ms  p95 {f['p95']:7.1f} ms"
                )
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"dashboard-{datetime.now(UTC):%Y%m%dT%H%M%S}.json"
    out.write_text(json.dumps(report, indent=2))
    print(f"written to {out.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
