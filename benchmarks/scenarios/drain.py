"""Scenario 2: drain a filled queue (lease + complete everything) with 1 and 4
consumer processes at batch 1/10/100; also each consumer's peak RSS."""

from __future__ import annotations

from functools import partial

from benchmarks.context import Bench
from benchmarks.fleet import Fleet
from benchmarks.results import Measurement
from benchmarks.systems import QUERATOR, System
from benchmarks.systems.base import Span

FILL_BATCH = 100
"""Batch size used to fill the queue before each timed drain (not timed)."""
THREADED = "querator-threads"
"""querator again, as N threads sharing one sync client in one process."""


def run(bench: Bench) -> None:
    """Items/s drained per (consumers, batch) for every system."""
    for system in bench.throughput_systems:
        bench.guarded(f"drain/{system.name}", partial(_system, bench, system))
    if QUERATOR in bench.systems:
        bench.guarded(f"drain/{THREADED}", lambda: _threaded(bench))


def drain_once(
    fleet: Fleet, bench: Bench, count: int, batch: int, method: str = "drain", **extra: int
) -> tuple[float, float]:
    """Fill a fresh queue with ``count`` items, drain it with every agent.

    Returns items/s and the agents' CPU time per item (µs, all their threads).
    """
    queue = bench.queue_name()
    fleet.call_one("reset", queue=queue, partitions=extra.pop("partitions", 1))
    return drain_queue(fleet, bench, queue, count, batch, method, **extra)


def drain_queue(
    fleet: Fleet, bench: Bench, queue: str, count: int, batch: int, method: str, **extra: int
) -> tuple[float, float]:
    """:func:`drain_once` in ``queue``, created empty (the store's other queues kept)."""
    fleet.call_one("produce", queue=queue, count=count, batch=FILL_BATCH)
    before = sum(fleet.call("cpu"))
    spans: list[Span] = fleet.call(method, None, queue=queue, batch=batch, **extra)
    cpu = sum(fleet.call("cpu")) - before
    drained = sum(span.count for span in spans)
    if drained != count:
        bench.note(f"{fleet.system}: drained {drained} of {count} items")
    rate = drained / (max(s.end for s in spans) - min(s.start for s in spans))
    return rate, 1e6 * cpu / max(1, drained)


def measure(
    bench: Bench, fleet: Fleet, batch: int, method: str = "drain", **extra: int
) -> tuple[list[float], int, list[float]]:
    """Warm up, size the repetitions from the warm-up rate, then time them.

    Returns the items/s of each repetition, the items per repetition and the
    client CPU µs per item of each repetition.
    """
    profile = bench.profile
    warm, _ = drain_once(fleet, bench, max(100, profile.drain_items // 20), batch, method, **extra)
    count = bench.sized(warm, profile.drain_items)
    runs = [
        drain_once(fleet, bench, count, batch, method, **extra) for _ in range(profile.repetitions)
    ]
    return [rate for rate, _ in runs], count, [cpu for _, cpu in runs]


def _system(bench: Bench, system: System) -> None:
    for consumers in bench.profile.consumers:
        with bench.fleet(system, consumers) as fleet:
            for batch in bench.profile.batches:
                values, count, cpu = measure(bench, fleet, batch)
                case = f"batch={batch} consumers={consumers}"
                bench.add(
                    Measurement(
                        "drain", case, system.name, "items/s", "higher", values, {"items": count}
                    )
                )
                bench.add(
                    Measurement(
                        "drain",
                        case,
                        system.name,
                        "client CPU µs/item",
                        "lower",
                        cpu,
                        {"items": count, "what": "user+system CPU of the consumer processes"},
                    )
                )
            peak = max(fleet.call("peak_rss"))
        if consumers == max(bench.profile.consumers):
            bench.add(
                Measurement(
                    "memory",
                    f"consumer peak RSS (drain, {consumers} consumers)",
                    system.name,
                    "MiB",
                    "lower",
                    [peak / 1024],
                )
            )


def _threaded(bench: Bench) -> None:
    with bench.fleet(QUERATOR, 1) as fleet:
        for consumers in bench.profile.consumers:
            for batch in bench.profile.batches:
                values, count, cpu = measure(
                    bench, fleet, batch, "drain_threads", threads=consumers
                )
                case = f"batch={batch} consumers={consumers}"
                bench.add(
                    Measurement(
                        "drain",
                        case,
                        THREADED,
                        "items/s",
                        "higher",
                        values,
                        {"items": count, "threads": consumers},
                    )
                )
                bench.add(
                    Measurement(
                        "drain",
                        case,
                        THREADED,
                        "client CPU µs/item",
                        "lower",
                        cpu,
                        {"items": count, "what": "user+system CPU of the one process"},
                    )
                )
