"""Runs listed by a search attribute (querator only), on PostgreSQL.

The store is filled in bulk with what started runs leave for this listing in
the results queue: each run's meta record (with its attributes) and its two
attribute entries (:mod:`querator.workflows.attributes`), produced 1,000 items
a call with the layout's own items, four calls at once (the ordinary
``produce``, not ``start()``: the start wakes and status entries are left out,
the listing reads neither). Run ``n`` has ``customer`` = ``c{n % 100}`` (1% of
the runs each) and ``tier`` = ``gold`` on half of those; the five oldest runs
alone hold ``region`` = ``north``. Started one second apart, newest last.

At each size of ``profile.attribute_sizes`` it times ``list_runs`` pages
(median of 15 calls, after an ``ANALYZE``):

- the newest 50 runs with ``customer`` = ``c07``, of any workflow and of one;
- the same with ``tier`` = ``gold`` too (half of them pass), named first and
  second: the rarer attribute is walked whatever the order, and the other is
  checked by a lookup of its entries before any run's records are read;
- the runs with ``region`` = ``north`` (5 runs, the oldest of the store).

An index keeps each page's time flat as the store grows: the issue's target is
under 50 ms at 1,000,000 runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio

from benchmarks.bulk_fill import analyze, bulk_produce
from benchmarks.context import Bench
from benchmarks.page_times import add_page_rows, median_ms
from benchmarks.systems import QUERATOR
from querator import AsyncQuerator, Item, Querator
from querator.workflows.attributes import AttributesRecord
from querator.workflows.inspection import list_runs
from querator.workflows.keys import RESULTS_QUEUE, RESULTS_SETTINGS, meta_key
from querator.workflows.stored import RunMeta, attribute_items, record_item

SCENARIO = "attribute_search"
PAGE = 50
WORKFLOW = "bench.searched"
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def run_items(n: int) -> list[Item]:
    """What the ``n``-th run left for the listing: its meta and attribute entries."""
    run_id = f"run-attr{n:012d}"
    values: dict[str, str | int | bool] = {"customer": f"c{n % 100:02d}"}
    if n % 200 < 100:
        values["tier"] = "gold"
    if n < 5:
        values["region"] = "north"
    started = EPOCH + timedelta(seconds=n)
    meta = RunMeta(
        workflow=WORKFLOW, args=f"[{n}]", queue="bench.work", started_at=started, attributes=values
    )
    items = [record_item(meta_key(run_id), meta, run_id)]
    return items + attribute_items(
        run_id, WORKFLOW, started, AttributesRecord(gen=0, values=values)
    )


async def fill(url: str, start: int, size: int) -> None:
    """Store the runs ``start .. size-1`` (:func:`run_items`)."""
    async with AsyncQuerator(url) as aq:
        await aq.create_queue(RESULTS_QUEUE, RESULTS_SETTINGS, exist_ok=True)
        await bulk_produce(aq, RESULTS_QUEUE, run_items, start, size)


def run(bench: Bench) -> None:
    """Filtered page times at growing store sizes."""
    if QUERATOR not in bench.systems:
        return
    bench.guarded("attribute_search/pages", lambda: _pages(bench))


CASES: dict[str, Callable[[Querator], list[Any]]] = {
    "customer=c07": lambda q: list_runs(q, attributes={"customer": "c07"}, limit=PAGE),
    "customer=c07, one workflow": lambda q: list_runs(
        q, workflow=WORKFLOW, attributes={"customer": "c07"}, limit=PAGE
    ),
    "customer=c07 and tier=gold": lambda q: list_runs(
        q, attributes={"customer": "c07", "tier": "gold"}, limit=PAGE
    ),
    "tier=gold and customer=c07": lambda q: list_runs(
        q, attributes={"tier": "gold", "customer": "c07"}, limit=PAGE
    ),
    "region=north (5 oldest runs)": lambda q: list_runs(q, attributes={"region": "north"}),
}


def _pages(bench: Bench) -> None:
    sizes = bench.profile.attribute_sizes
    rows: dict[str, list[float]] = {case: [] for case in CASES}
    with bench.fresh_database(QUERATOR) as dsn:
        stored = 0
        for size in sizes:
            began = time.monotonic()
            anyio.run(fill, dsn, stored, size)
            stored = size
            analyze(dsn)
            bench.log(
                f"  attribute_search: {size:,} runs stored ({time.monotonic() - began:.0f} s)"
            )
            with Querator(dsn) as q:
                assert len(CASES["customer=c07"](q)) == min(PAGE, size // 100)
                assert len(CASES["region=north (5 oldest runs)"](q)) == 5
                for case, call in CASES.items():
                    rows[case].append(median_ms(lambda call=call: call(q)))  # type: ignore[misc]
    add_page_rows(bench, SCENARIO, sizes, PAGE, rows)
