"""Background tasks (issue 36): no-op tasks deferred one at a time and in
batches of 100 by one producer, then run by 2 worker processes x concurrency 8;
tasks/s and the client CPU per task, querator's ``@task`` next to
Procrastinate's tasks and PgQueuer's entrypoints."""

from __future__ import annotations

from functools import partial

from benchmarks.context import Bench
from benchmarks.results import Measurement
from benchmarks.scenarios.drain import measure
from benchmarks.systems import System
from benchmarks.systems.base import Span

TASK_SYSTEMS = ("querator-tasks", "procrastinate", "pgqueuer")
"""The systems this scenario compares (the others have no task API)."""
WORKERS = 2
CONCURRENCY = 8
BATCHES = (1, 100)


def run(bench: Bench) -> None:
    """Defer rates and the drain by two workers, for every task system chosen."""
    for system in bench.systems:
        if system.name in TASK_SYSTEMS:
            bench.guarded(f"tasks/{system.name}", partial(_system, bench, system))


def _system(bench: Bench, system: System) -> None:
    profile = bench.profile
    with bench.fleet(system, 1) as fleet:
        for batch in BATCHES:

            def defer(count: int, batch: int = batch) -> tuple[float, float]:
                queue = bench.queue_name()
                fleet.call_one("reset", queue=queue)
                before = fleet.call_one("cpu")
                span: Span = fleet.call_one("produce", queue=queue, count=count, batch=batch)
                cpu = fleet.call_one("cpu") - before
                return span.count / (span.end - span.start), 1e6 * cpu / max(1, span.count)

            warm, _ = defer(max(batch, profile.produce_items // 20))
            count = bench.sized(warm, profile.produce_items)
            count = max(batch, count - count % batch)
            runs = [defer(count) for _ in range(profile.repetitions)]
            case = f"defer, batch={batch}"
            _add(bench, system, case, runs, count, "the producer process")
    with bench.fleet(system, WORKERS) as fleet:
        rates, count, cpu = measure(bench, fleet, CONCURRENCY)
        case = f"run: {WORKERS} workers x concurrency {CONCURRENCY}"
        _add(bench, system, case, list(zip(rates, cpu, strict=True)), count, "the workers")


def _add(
    bench: Bench, system: System, case: str, runs: list[tuple[float, float]], count: int, who: str
) -> None:
    bench.add(
        Measurement(
            "tasks", case, system.name, "tasks/s", "higher", [r for r, _ in runs], {"tasks": count}
        )
    )
    bench.add(
        Measurement(
            "tasks",
            case,
            system.name,
            "client CPU µs/task",
            "lower",
            [c for _, c in runs],
            {"tasks": count, "what": f"user+system CPU of {who}"},
        )
    )
