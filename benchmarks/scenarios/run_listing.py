"""Runs listed through the run index (querator only), on PostgreSQL.

Runs of a workflow nobody serves (they stay ``running``) are started one by one
with ``start()`` until the store holds each size of ``profile.listing_sizes``;
five runs of a rare workflow are started first, so they are the oldest. At each
size the harness times ``list_runs`` pages (median of 15 calls):

- the newest 50 runs;
- the newest 50 ``running`` runs of the common workflow;
- the runs of the rare workflow (5 runs among all the others, the oldest).

An index keeps each page's time flat as the store grows; a scan of the
stored records grows with it (the rare workflow's page is a scan's worst case).

It also measures what the index costs: the ``start()`` latency with and
without its entries (the same code with the entries left out), alternating
``AB_ROUNDS`` rounds of ``AB_STARTS`` starts each, in a fresh database each.
"""

from __future__ import annotations

import statistics
import time

from benchmarks.context import Bench
from benchmarks.page_times import add_page_rows, median_ms
from benchmarks.results import Measurement
from benchmarks.systems import QUERATOR
from querator import Querator
from querator.workflows import stored, workflow
from querator.workflows.inspection import list_runs

SCENARIO = "run_listing"
AB_ROUNDS = 3
AB_STARTS = 300
PAGE = 50


@workflow(name="bench.listed")
def listed(n: int) -> int:
    """Never served: its runs stay running."""
    return n


@workflow(name="bench.rare")
def rare(n: int) -> int:
    """Never served; five runs of it, the oldest in the store."""
    return n


def run(bench: Bench) -> None:
    """Page times at growing store sizes; start() with and without the index."""
    if QUERATOR not in bench.systems:
        return
    bench.guarded("run_listing/pages", lambda: _pages(bench))
    bench.guarded("run_listing/start", lambda: _start_cost(bench))


def _pages(bench: Bench) -> None:
    sizes = bench.profile.listing_sizes
    rows: dict[str, list[float]] = {"newest": [], "running of one workflow": [], "rare": []}
    with bench.fresh_database(QUERATOR) as dsn, Querator(dsn) as q:
        for n in range(5):
            q.start(rare, n)
        stored = 5
        for size in sizes:
            began = time.monotonic()
            while stored < size:
                q.start(listed, stored)
                stored += 1
            bench.log(f"  run_listing: {size:,} runs stored ({time.monotonic() - began:.1f} s)")
            assert len(list_runs(q, workflow="bench.rare")) == 5
            rows["newest"].append(median_ms(lambda: list_runs(q, limit=PAGE)))
            rows["running of one workflow"].append(
                median_ms(
                    lambda: list_runs(q, status="running", workflow="bench.listed", limit=PAGE)
                )
            )
            rows["rare"].append(median_ms(lambda: list_runs(q, workflow="bench.rare")))
    add_page_rows(bench, SCENARIO, sizes, PAGE, rows)


def _start_ms(bench: Bench) -> float:
    times = []
    with bench.fresh_database(QUERATOR) as dsn, Querator(dsn) as q:
        for n in range(20):  # warm: queues created, statements prepared
            q.start(listed, n)
        for n in range(AB_STARTS):
            began = time.perf_counter()
            q.start(listed, n)
            times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000


def _start_cost(bench: Bench) -> None:
    indexed, bare = [], []
    real = stored.index_items
    try:
        for _ in range(AB_ROUNDS):
            stored.index_items = real
            indexed.append(_start_ms(bench))
            stored.index_items = lambda *args, **kwargs: []  # the same start, no entries
            bare.append(_start_ms(bench))
    finally:
        stored.index_items = real
    detail = {"rounds": AB_ROUNDS, "starts": AB_STARTS, "with": indexed, "without": bare}
    rows = (
        ("start() p50, with the run index entries", statistics.median(indexed)),
        ("start() p50, without them (same code, entries left out)", statistics.median(bare)),
    )
    for case, value in rows:
        bench.add(Measurement(SCENARIO, case, QUERATOR.name, "ms", "lower", [value], detail))
