"""Scenario 5: does a deep queue slow leasing down? Single-item lease latency
with a backlog of 1k items and of 1M (100k in --quick).

The queue is filled through each system's own produce API (batch 1000, two
processes) and the database vacuumed and analyzed (as autovacuum soon would),
then one client leases 50 items untimed and times ``latency_samples`` leases
of one item (each completed, untimed). The samples are split into ``repetitions`` groups;
the table shows the median of the groups' p50s.
"""

from __future__ import annotations

import time
from functools import partial

from benchmarks import pg
from benchmarks.context import Bench
from benchmarks.fleet import Fleet
from benchmarks.results import Measurement
from benchmarks.stats import percentile
from benchmarks.systems import System

FILLERS = 2
FILL_BATCH = 1000
FILL_CHUNK = 50_000
"""Items per fill step; the fill gives up when it would take longer than FILL_LIMIT."""
FILL_LIMIT = 240.0
"""Seconds a fill may take (estimated from its first step)."""
WARM_SAMPLES = 50
"""Untimed leases before the timed ones."""
SAMPLE_SECONDS = 15.0
"""Leases are timed for at most this long (slow systems give fewer samples)."""


def run(bench: Bench) -> None:
    """Lease latency p50/p99 per backlog size, for every system."""
    for system in bench.queues:
        bench.guarded(f"backlog/{system.name}", partial(_system, bench, system))


def _fill(bench: Bench, fleet: Fleet, queue: str, total: int) -> bool:
    """Produce ``total`` items; False when it would take too long."""
    began = time.monotonic()
    done = 0
    while done < total:
        step = min(FILL_CHUNK, total - done)
        share = [step // FILLERS + (1 if i < step % FILLERS else 0) for i in range(FILLERS)]
        for index, count in enumerate(share):
            fleet.start(
                "produce", range(index, index + 1), queue=queue, count=count, batch=FILL_BATCH
            )
        fleet.collect(list(range(FILLERS)))
        done += step
        elapsed = time.monotonic() - began
        if done < total and elapsed / done * total > FILL_LIMIT:
            bench.note(
                f"backlog/{fleet.system}: filling {total:,} items would take "
                f"~{elapsed / done * total:.0f}s; skipped"
            )
            return False
    bench.log(f"  filled {total:,} items in {time.monotonic() - began:.1f}s")
    return True


def _system(bench: Bench, system: System) -> None:
    profile = bench.profile
    with bench.fresh_database(system) as dsn, bench.fleet(system, FILLERS, dsn) as fleet:
        for backlog in profile.backlogs:
            queue = bench.queue_name()
            fleet.call_one("reset", queue=queue)
            if not _fill(bench, fleet, queue, backlog):
                continue
            pg.vacuum(dsn)
            fleet.call_one("lease_latency", queue=queue, samples=WARM_SAMPLES, seconds=5.0)
            samples: list[float] = fleet.call_one(
                "lease_latency",
                queue=queue,
                samples=profile.latency_samples,
                seconds=SAMPLE_SECONDS,
            )
            groups = [samples[i :: profile.repetitions] for i in range(profile.repetitions)]
            for label, pct in (("p50", 50.0), ("p99", 99.0)):
                bench.add(
                    Measurement(
                        "backlog",
                        f"backlog={backlog:,}",
                        system.name,
                        f"ms lease {label}",
                        "lower",
                        [1000 * percentile(g, pct) for g in groups],
                        {"samples": len(samples)},
                    )
                )
            fleet.call_one("reset", queue=bench.queue_name())
