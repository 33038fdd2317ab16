"""A drain beside a purge of finished runs past retention (querator only), on PostgreSQL.

The store is filled in bulk (:mod:`benchmarks.bulk_fill`) with
``profile.retention_runs`` runs that completed long ago, each as a run leaves
itself in the results queue: its meta (one search attribute), two step
records, its result, its run-index entries (``running`` and ``completed``) and
attribute entries. Then, on the same database, a queue of items is drained by
``CONSUMERS`` agent processes at batch ``BATCH`` (the ``drain`` scenario's
drain), in rounds that alternate:

- quiet: nothing else runs;
- purging: a thread purges the finished runs beside it as a worker's
  heartbeat does under a backlog: retention sweep after retention sweep
  (:func:`~querator.workflows.retention.sweep_retention_async`, a batch of
  ``SWEEP_BATCH`` runs each, with a retention of one second), each followed
  by the heartbeat's pause (:func:`~querator.workflows.engine.heartbeat.sweep_pause`).

It reports each kind's median items/s, their ratio (the issue's bound: the
purging drain within 10% of the quiet one), the runs purged a second while
purging, the runs left, and the load average before and after (on a shared
machine, read the ratio: both kinds ran under the same load, alternating).
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from datetime import UTC, datetime, timedelta

import anyio

from benchmarks.bulk_fill import analyze, bulk_produce
from benchmarks.context import Bench
from benchmarks.fleet import Fleet
from benchmarks.results import Measurement
from benchmarks.scenarios.drain import drain_queue
from benchmarks.systems import QUERATOR
from querator import AsyncQuerator, Item, Querator, QueueSettings
from querator.workflows.attributes import AttributesRecord
from querator.workflows.engine.heartbeat import sweep_pause
from querator.workflows.keys import RESULTS_QUEUE, RESULTS_SETTINGS, meta_key, result_key, step_key
from querator.workflows.retention import sweep_retention_async
from querator.workflows.stored import (
    RunMeta,
    RunRecord,
    StepRecord,
    attribute_items,
    index_items,
    record_item,
)

SCENARIO = "retention_drain"
CONSUMERS = 2
BATCH = 10
ROUNDS = 3
"""Quiet and purging drains, alternating: this many of each."""
WORKFLOW = "bench.kept"
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def run_items(n: int) -> list[Item]:
    """What the ``n``-th finished run left in the results queue."""
    run_id = f"run-kept{n:012d}"
    started = EPOCH + timedelta(seconds=n)
    values: dict[str, str | int | bool] = {"customer": f"c{n % 100:02d}"}
    meta = RunMeta(
        workflow=WORKFLOW, args=f"[{n}]", queue="bench.work", started_at=started, attributes=values
    )
    ended = started + timedelta(seconds=0.5)
    items = [record_item(meta_key(run_id), meta, run_id)]
    items += [
        record_item(
            step_key(run_id, position),
            StepRecord(step="bench.step", ok=True, result=str(n), finished_at=ended),
            run_id,
        )
        for position in (0, 1)
    ]
    record = RunRecord(ok=True, result=str(n), error=None, cancelled=False, finished_at=ended)
    items.append(record_item(result_key(run_id), record, run_id))
    items += index_items(run_id, meta, "running", new=True)
    items += index_items(run_id, meta, "completed")
    return items + attribute_items(
        run_id, WORKFLOW, started, AttributesRecord(gen=0, values=values)
    )


async def _fill(url: str, size: int) -> None:
    async with AsyncQuerator(url) as aq:
        await aq.create_queue(RESULTS_QUEUE, RESULTS_SETTINGS, exist_ok=True)
        await bulk_produce(aq, RESULTS_QUEUE, run_items, 0, size)


class Purger:
    """Retention sweeps back to back on a thread, until stopped."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.purged = 0
        self.seconds = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Purger:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        began = time.monotonic()
        with Querator(self.url) as q:
            while not self._stop.is_set():
                swept = time.monotonic()
                purged = q.call(sweep_retention_async, q.aio, {WORKFLOW: 1.0})
                self.purged += purged
                if not purged:
                    break  # the store is purged
                self._stop.wait(sweep_pause(time.monotonic() - swept))
        self.seconds = time.monotonic() - began


def run(bench: Bench) -> None:
    """Drain rates, quiet and beside a purge, alternating."""
    if QUERATOR not in bench.systems:
        return
    bench.guarded("retention_drain", lambda: _rounds(bench))


def _rounds(bench: Bench) -> None:
    size = bench.profile.retention_runs
    with bench.fresh_database(QUERATOR) as dsn, bench.fleet(QUERATOR, CONSUMERS, dsn) as fleet:
        began = time.monotonic()
        anyio.run(_fill, dsn, size)
        analyze(dsn)
        bench.log(f"  retention_drain: {size:,} runs stored ({time.monotonic() - began:.0f} s)")
        _measure(bench, fleet, dsn, size)


def _drain(bench: Bench, fleet: Fleet, dsn: str, count: int) -> float:
    """Items/s of one drain of ``count`` items in a new queue, deleted after (the
    agents' ``reset`` would drop the results queue too)."""
    queue = bench.queue_name()
    with Querator(dsn) as q:
        q.create_queue(queue, QueueSettings(lease_timeout=30))
        try:
            return drain_queue(fleet, bench, queue, count, BATCH, "drain")[0]
        finally:
            q.delete_queue(queue, force=True)


def _measure(bench: Bench, fleet: Fleet, dsn: str, size: int) -> None:
    load_before = os.getloadavg()
    warm = _drain(bench, fleet, dsn, max(100, bench.profile.drain_items // 20))
    count = bench.sized(warm, bench.profile.drain_items)
    quiet: list[float] = []
    purging: list[float] = []
    purged = 0
    seconds = 0.0
    for _ in range(ROUNDS):
        quiet.append(_drain(bench, fleet, dsn, count))
        with Purger(dsn) as purger:
            purging.append(_drain(bench, fleet, dsn, count))
        purged += purger.purged
        seconds += purger.seconds
        if purger.purged == 0:
            bench.note(f"{SCENARIO}: no run was left to purge")
    load_after = os.getloadavg()
    ratio = statistics.median(purging) / statistics.median(quiet)
    detail = {
        "runs": size,
        "items": count,
        "consumers": CONSUMERS,
        "batch": BATCH,
        "quiet": quiet,
        "purging": purging,
        "purged": purged,
        "load_before": load_before,
        "load_after": load_after,
    }
    case = f"drain batch={BATCH} consumers={CONSUMERS}, {size:,} finished runs stored"
    rows = (
        (f"{case}: quiet", "items/s", "higher", quiet),
        (f"{case}: beside a purge", "items/s", "higher", purging),
        (f"{case}: beside a purge / quiet", "ratio", "higher", [ratio]),
        (f"{case}: runs purged a second", "runs/s", "higher", [purged / max(seconds, 1e-9)]),
    )
    for name, metric, better, values in rows:
        bench.add(Measurement(SCENARIO, name, QUERATOR.name, metric, better, values, detail))
    bench.log(
        f"  {SCENARIO}: {purged:,} of {size:,} runs purged in {seconds:.1f} s; "
        f"load average {load_before[0]:.1f} -> {load_after[0]:.1f}"
    )
