"""Scenario 6: querator's partitions: drain with 4 consumers from 1 vs 8
partitions (the peers have no partitions; this compares querator with itself)."""

from __future__ import annotations

from benchmarks.context import Bench
from benchmarks.results import Measurement
from benchmarks.scenarios.drain import measure
from benchmarks.systems import QUERATOR

CONSUMERS = 4
BATCHES = (10, 100)


def run(bench: Bench) -> None:
    """Items/s drained by 4 consumers per partition count and batch size."""
    if QUERATOR not in bench.systems:
        return
    bench.guarded("partitions/querator", lambda: _querator(bench))


def _querator(bench: Bench) -> None:
    consumers = min(CONSUMERS, max(bench.profile.consumers))
    batches = [b for b in BATCHES if b in bench.profile.batches] or list(bench.profile.batches)
    with bench.fleet(QUERATOR, consumers) as fleet:
        for batch in batches:
            for partitions in bench.profile.partition_counts:
                values, count, _ = measure(bench, fleet, batch, partitions=partitions)
                bench.add(
                    Measurement(
                        "partitions",
                        f"batch={batch} consumers={consumers}",
                        f"querator/{partitions}p",
                        "items/s",
                        "higher",
                        values,
                        {"items": count, "partitions": partitions},
                    )
                )
