"""Scenario 1: produce small items from one client, batch sizes 1/10/100."""

from __future__ import annotations

from functools import partial

from benchmarks.context import Bench
from benchmarks.results import Measurement
from benchmarks.systems import System
from benchmarks.systems.base import Span


def run(bench: Bench) -> None:
    """Items/s of one producer process, per batch size, for every system."""
    for system in bench.throughput_systems:
        bench.guarded(f"produce/{system.name}", partial(_system, bench, system))


def _rate(span: Span) -> float:
    return span.count / (span.end - span.start)


def _system(bench: Bench, system: System) -> None:
    profile = bench.profile
    with bench.fleet(system, 1) as fleet:
        for batch in profile.batches:

            def produce(count: int, batch: int = batch) -> Span:
                queue = bench.queue_name()
                fleet.call_one("reset", queue=queue)
                span: Span = fleet.call_one("produce", queue=queue, count=count, batch=batch)
                return span

            warm = produce(max(batch, profile.produce_items // 20))
            count = bench.sized(_rate(warm), profile.produce_items)
            count = max(batch, count - count % batch)
            values = [_rate(produce(count)) for _ in range(profile.repetitions)]
            bench.add(
                Measurement(
                    "produce",
                    f"batch={batch}",
                    system.name,
                    "items/s",
                    "higher",
                    values,
                    {"items": count},
                )
            )
