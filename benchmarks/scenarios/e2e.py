"""Scenario 3: producers and consumers together.

*saturated*: 2 producer processes (batch 10, as fast as they can) and 4
consumer processes (batch 10) for ``e2e_seconds``; items/s consumed and
produce-to-lease latency, counting only items received after the first second.
*paced*: 1 producer offering ``paced_rate`` single items per second to 4
waiting consumers: the latency of a wakeup, not of a backlog.
"""

from __future__ import annotations

import math
import time
from functools import partial

from benchmarks.context import Bench
from benchmarks.fleet import Fleet
from benchmarks.results import Measurement
from benchmarks.stats import median, percentile
from benchmarks.systems import System
from benchmarks.systems.base import Received

PRODUCERS = 2
CONSUMERS = 4
BATCH = 10
WARM = 1.0
"""Seconds at the start of each window whose items are not counted."""


def run(bench: Bench) -> None:
    """Throughput and latency of producers and consumers running together."""
    for system in bench.queues:
        bench.guarded(f"e2e/{system.name}", partial(_system, bench, system))


def _window(
    fleet: Fleet, bench: Bench, producers: int, rate: float, batch: int
) -> list[tuple[float, float]]:
    """One run; the (receive time, latency) samples inside the counted window."""
    seconds = bench.profile.e2e_seconds
    queue = bench.queue_name()
    fleet.call_one("reset", queue=queue)
    consumers = fleet.start(
        "consume",
        range(PRODUCERS, PRODUCERS + CONSUMERS),
        queue=queue,
        batch=BATCH,
        seconds=seconds + 0.5,
    )
    time.sleep(0.3)  # let the consumers start waiting
    started = time.monotonic()
    producing = fleet.start(
        "produce",
        range(producers),
        queue=queue,
        count=10**9,
        batch=batch,
        rate=rate,
        seconds=seconds,
    )
    fleet.collect(producing)
    received: list[Received] = fleet.collect(consumers)
    low, high = started + WARM, started + seconds
    return [s for r in received for s in r.samples if low <= s[0] <= high]


def _system(bench: Bench, system: System) -> None:
    profile = bench.profile
    counted = profile.e2e_seconds - WARM
    with bench.fleet(system, PRODUCERS + CONSUMERS) as fleet:
        runs = [_window(fleet, bench, PRODUCERS, 0.0, BATCH) for _ in range(profile.repetitions)]
        case = f"saturated: {PRODUCERS} producers x batch {BATCH}, {CONSUMERS} consumers"
        _record(bench, system, case, runs, counted)
        paced_rate = profile.paced_rate
        runs = [_window(fleet, bench, 1, paced_rate, 1) for _ in range(profile.repetitions)]
        case = f"paced: {paced_rate:g} items/s, {CONSUMERS} waiting consumers"
        _record(bench, system, case, runs, counted, with_rate=False)


def _record(
    bench: Bench,
    system: System,
    case: str,
    runs: list[list[tuple[float, float]]],
    counted: float,
    with_rate: bool = True,
) -> None:
    if with_rate:
        rates = [len(samples) / counted for samples in runs]
        bench.add(Measurement("e2e", case, system.name, "items/s", "higher", rates))
    for label, pct in (("p50", 50.0), ("p99", 99.0)):
        values = [1000 * percentile([s[1] for s in samples], pct) for samples in runs]
        if not any(math.isnan(v) for v in values):  # no NaN: every run received something
            bench.add(
                Measurement(
                    "e2e",
                    case,
                    system.name,
                    f"ms latency {label}",
                    "lower",
                    values,
                    {"received": median([len(s) for s in runs])},
                )
            )
        else:
            bench.note(f"e2e/{system.name}: {case}: a run received nothing")
