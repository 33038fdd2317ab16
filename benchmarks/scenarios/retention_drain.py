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

The rounds run in the order quiet, purging, purging, quiet, ... (a drift in the
machine's speed falls on both kinds alike). It reports each kind's median
items/s, their ratio (the issue's bound: the purging drain within 10% of the
quiet one), the runs purged a second while purging, the runs left, and the
load average before and after. :mod:`benchmarks.retention_store` runs the same
rounds, longer, on a store filled once and kept.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
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
from querator.workflows.engine.heartbeat import SWEEP_REST, sweep_pause
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
ROUNDS = 4
"""Quiet and purging drains, alternating: this many of each (:func:`drain_rounds`)."""
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


async def fill(url: str, start: int, size: int) -> None:
    """Store the finished runs ``start .. size-1`` (:func:`run_items`)."""
    async with AsyncQuerator(url) as aq:
        await aq.create_queue(RESULTS_QUEUE, RESULTS_SETTINGS, exist_ok=True)
        await bulk_produce(aq, RESULTS_QUEUE, run_items, start, size)


class Purger:
    """Retention sweeps back to back on a thread, until stopped: each followed by
    :func:`~querator.workflows.engine.heartbeat.sweep_pause` with ``rest``."""

    def __init__(self, url: str, rest: float = SWEEP_REST) -> None:
        self.url = url
        self.rest = rest
        self.purged = 0
        self.seconds = 0.0
        self.sweeps: list[float] = []
        """Seconds each sweep took."""
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
                took = time.monotonic() - swept
                self.purged += purged
                if not purged:
                    break  # the store is purged
                self.sweeps.append(took)
                self._stop.wait(sweep_pause(took, self.rest))
        self.seconds = time.monotonic() - began


@dataclass
class Purging:
    """The drains beside a purge with one pause (``rest``) and what the purges did."""

    rest: float
    rates: list[float] = field(default_factory=list)
    """Items/s of each drain."""
    purged: int = 0
    seconds: float = 0.0
    """Seconds the purges ran (beside the drains)."""
    sweeps: list[float] = field(default_factory=list)
    """Seconds each sweep took."""

    @property
    def pace(self) -> float:
        """Runs purged a second while purging."""
        return self.purged / max(self.seconds, 1e-9)


@dataclass
class Rounds:
    """The drains' items/s, quiet and beside a purge with each pause."""

    quiet: list[float] = field(default_factory=list)
    purging: list[Purging] = field(default_factory=list)

    def ratio(self, purging: Purging) -> float:
        """Those purging drains' median items/s over the quiet ones'."""
        return statistics.median(purging.rates) / statistics.median(self.quiet)


def drain_rounds(
    bench: Bench,
    fleet: Fleet,
    dsn: str,
    count: int,
    cycles: int,
    rests: Sequence[float] = (SWEEP_REST,),
) -> Rounds:
    """``cycles`` times: a quiet drain of ``count`` items and one beside a purge
    with each pause of ``rests``, in that order and the reverse in turn (quiet,
    purging, purging, quiet, ... with one pause), so a drift in the machine's
    speed falls on every kind alike."""
    rounds = Rounds(purging=[Purging(rest) for rest in rests])
    kinds: list[Purging | None] = [None, *rounds.purging]
    for cycle in range(cycles):
        for kind in kinds if cycle % 2 == 0 else kinds[::-1]:
            if kind is None:
                rounds.quiet.append(timed_drain(bench, fleet, dsn, count))
                continue
            with Purger(dsn, kind.rest) as purger:
                kind.rates.append(timed_drain(bench, fleet, dsn, count))
            kind.purged += purger.purged
            kind.seconds += purger.seconds
            kind.sweeps += purger.sweeps
            if purger.purged == 0:
                bench.note(f"{SCENARIO}: no run was left to purge")
    return rounds


def run(bench: Bench) -> None:
    """Drain rates, quiet and beside a purge, alternating."""
    if QUERATOR not in bench.systems:
        return
    bench.guarded("retention_drain", lambda: _rounds(bench))


def _rounds(bench: Bench) -> None:
    size = bench.profile.retention_runs
    with bench.fresh_database(QUERATOR) as dsn, bench.fleet(QUERATOR, CONSUMERS, dsn) as fleet:
        began = time.monotonic()
        anyio.run(fill, dsn, 0, size)
        analyze(dsn)
        bench.log(f"  retention_drain: {size:,} runs stored ({time.monotonic() - began:.0f} s)")
        _measure(bench, fleet, dsn, size)


def timed_drain(bench: Bench, fleet: Fleet, dsn: str, count: int) -> float:
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
    warm = timed_drain(bench, fleet, dsn, max(100, bench.profile.drain_items // 20))
    count = bench.sized(warm, bench.profile.drain_items)
    rounds = drain_rounds(bench, fleet, dsn, count, ROUNDS)
    [purging] = rounds.purging
    load_after = os.getloadavg()
    detail = {
        "runs": size,
        "items": count,
        "consumers": CONSUMERS,
        "batch": BATCH,
        "quiet": rounds.quiet,
        "purging": purging.rates,
        "purged": purging.purged,
        "load_before": load_before,
        "load_after": load_after,
    }
    case = f"drain batch={BATCH} consumers={CONSUMERS}, {size:,} finished runs stored"
    rows = (
        (f"{case}: quiet", "items/s", "higher", rounds.quiet),
        (f"{case}: beside a purge", "items/s", "higher", purging.rates),
        (f"{case}: beside a purge / quiet", "ratio", "higher", [rounds.ratio(purging)]),
        (f"{case}: runs purged a second", "runs/s", "higher", [purging.pace]),
    )
    for name, metric, better, values in rows:
        bench.add(Measurement(SCENARIO, name, QUERATOR.name, metric, better, values, detail))
    bench.log(
        f"  {SCENARIO}: {purging.purged:,} of {size:,} runs purged in {purging.seconds:.1f} s; "
        f"load average {load_before[0]:.1f} -> {load_after[0]:.1f}"
    )
