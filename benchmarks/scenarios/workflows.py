"""Issue 5: querator's workflow layer next to DBOS 3.4, a three-step no-op workflow.

DBOS (one agent process holding its runtime) runs each workflow in the calling
process, from 1 and 4 caller threads. querator runs its workflows on worker
processes (``Worker(q, fns, concurrency=8)`` in agents of their own) while a
caller agent starts them: from 1 and 4 caller threads waiting for each result
(DBOS's rows), and N runs started at once then every result awaited, with 1
and 2 worker processes (time from the first start to the last result). It also
times enqueue -> first step on an idle, waiting worker, one run at a time.
Last, the callers start their runs eagerly (``start(..., eager=True)``): each
runs its own run's steps, as DBOS's callers do, the workers idle.

With both systems chosen, one caller of each also takes turns in one window
(``ALTERNATING`` case): a querator caller starting its runs eagerly (one idle
worker process beside it, as a deployment has) and DBOS's, round after round,
so the ratio of the two is read from the same minutes (the rows above are
taken minutes apart, and one caller's rate moves with whatever else the
machine does then).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from benchmarks.context import Bench
from benchmarks.results import Measurement
from benchmarks.stats import percentile
from benchmarks.systems import DBOS, QUERATOR
from benchmarks.systems.base import Span

SCENARIO = "workflows"
CASE = "3-step no-op workflow"
CONCURRENCY = 8
"""``Worker(concurrency=...)`` of every querator worker process."""
WORKERS = 2
"""querator worker processes, at most."""
LATENCY_PAUSE = 0.05
"""Seconds between latency samples, so the worker is back waiting."""
ALTERNATING = f"{CASE}, 1 caller, the two systems in turns (querator: eager start)"
"""The case of the alternating rounds."""
ROUNDS = 3
"""Alternating rounds, at least (the profile's repetitions when more)."""


def run(bench: Bench) -> None:
    """Workflows/s of DBOS and querator (whichever are installed and chosen)."""
    if DBOS in bench.systems:
        bench.guarded("workflows/dbos", lambda: _measure_dbos(bench))
    if QUERATOR in bench.systems:
        bench.guarded("workflows/querator", lambda: _measure_querator(bench))
    if DBOS in bench.systems and QUERATOR in bench.systems:
        bench.guarded("workflows/alternating", lambda: _measure_alternating(bench))


def _rate(span: Span) -> float:
    return span.count / (span.end - span.start)


def _callers(bench: Bench) -> list[int]:
    return sorted({1, *bench.profile.consumers})


def _warm_count(bench: Bench) -> int:
    return max(10, bench.profile.workflows // 20)


def _timed(bench: Bench, call: Callable[..., Span], threads: int) -> tuple[int, list[float]]:
    """Warm up, size, then time ``profile.repetitions`` runs of ``call``."""
    profile = bench.profile
    warm: Span = call(count=_warm_count(bench), threads=threads)
    count = bench.sized(_rate(warm), profile.workflows)
    return count, [_rate(call(count=count, threads=threads)) for _ in range(profile.repetitions)]


def _add(
    bench: Bench, case: str, system: str, count: int, values: list[float], **detail: object
) -> None:
    bench.add(
        Measurement(
            SCENARIO, case, system, "workflows/s", "higher", values, {"workflows": count, **detail}
        )
    )


def _measure_dbos(bench: Bench) -> None:
    with bench.fresh_database(DBOS) as dsn, bench.fleet(DBOS, 1, dsn) as fleet:
        for threads in _callers(bench):
            count, values = _timed(bench, lambda **kw: fleet.call_one("workflows", **kw), threads)
            _add(bench, f"{CASE}, {threads} caller threads", DBOS.name, count, values)


def _measure_querator(bench: Bench) -> None:
    profile = bench.profile
    name = QUERATOR.name
    with bench.fresh_database(QUERATOR) as dsn, bench.fleet(QUERATOR, 1 + WORKERS, dsn) as fleet:
        # agent 0 is the caller; agents 1.. are worker processes
        def call(**kw: object) -> Span:
            span: Span = fleet.call_one("workflows", **kw)
            return span

        fleet.call("workflow_worker", range(1, 2), concurrency=CONCURRENCY)
        call(count=20, threads=1)  # warm the worker and the caller
        samples = max(20, min(200, profile.latency_samples))
        pairs = fleet.call_one("workflow_latency", samples=samples, pause=LATENCY_PAUSE)
        series = {
            "enqueue -> first step, idle worker (1 process)": [p[0] * 1000 for p in pairs],
            "the start() call alone (meta + wake task, one transaction)": [
                p[1] * 1000 for p in pairs
            ],
        }
        for case, timings in series.items():
            for label, pct in (("p50", 50.0), ("p99", 99.0)):
                bench.add(
                    Measurement(
                        SCENARIO,
                        case,
                        name,
                        f"ms latency {label}",
                        "lower",
                        [percentile(timings, pct)],
                        {"samples": len(timings)},
                    )
                )
        bulk: list[float] = []
        for workers in range(1, WORKERS + 1):
            if workers > 1:
                fleet.call("workflow_worker", range(workers, workers + 1), concurrency=CONCURRENCY)
            cpu_before = sum(fleet.call("cpu", range(1, workers + 1)))
            count, bulk = _timed(bench, call, 0)
            cpu = sum(fleet.call("cpu", range(1, workers + 1))) - cpu_before
            runs = _warm_count(bench) + count * profile.repetitions
            _add(
                bench,
                f"{CASE}, N started at once, {workers} worker processes x {CONCURRENCY}",
                name,
                count,
                bulk,
                workers=workers,
                concurrency=CONCURRENCY,
            )
            bench.add(
                Measurement(
                    SCENARIO,
                    f"{CASE}, N started at once, {workers} worker processes x {CONCURRENCY}",
                    name,
                    "worker CPU ms/workflow",
                    "lower",
                    [cpu * 1000 / runs],
                    {"workflows": runs},
                )
            )
        bench.add(
            Measurement(
                SCENARIO,
                f"per-step overhead, {WORKERS} worker processes (1 / workflows/s / 3)",
                name,
                "ms per step",
                "lower",
                [1000.0 / rate / 3 for rate in bulk],
            )
        )
        for threads in _callers(bench):
            count, values = _timed(bench, call, threads)
            _add(
                bench,
                f"{CASE}, {threads} caller threads",
                name,
                count,
                values,
                workers=WORKERS,
                concurrency=CONCURRENCY,
            )
        for threads in _callers(bench):  # the callers run their runs (DBOS's way)
            count, values = _timed(bench, partial(call, eager=True), threads)
            _add(bench, f"{CASE}, {threads} caller threads, eager start", name, count, values)


def _measure_alternating(bench: Bench) -> None:
    """One caller of each system, in turns (see the module doc): the median of
    each system's rounds, each round about ``target_seconds`` long."""
    with (
        bench.fresh_database(DBOS) as dbos_dsn,
        bench.fleet(DBOS, 1, dbos_dsn) as dbos,
        bench.fresh_database(QUERATOR) as querator_dsn,
        bench.fleet(QUERATOR, 2, querator_dsn) as querator,
    ):
        querator.call("workflow_worker", range(1, 2), concurrency=CONCURRENCY)
        calls: dict[str, Callable[..., Span]] = {
            DBOS.name: lambda **kw: dbos.call_one("workflows", **kw),
            QUERATOR.name: lambda **kw: querator.call_one("workflows", eager=True, **kw),
        }
        counts = {
            name: bench.sized(
                _rate(call(count=_warm_count(bench), threads=1)), bench.profile.workflows
            )
            for name, call in calls.items()
        }
        rates: dict[str, list[float]] = {name: [] for name in calls}
        for _ in range(max(ROUNDS, bench.profile.repetitions)):
            for name, call in calls.items():
                rates[name].append(_rate(call(count=counts[name], threads=1)))
        for name, values in rates.items():
            _add(bench, ALTERNATING, name, counts[name], values, rounds=len(values))
