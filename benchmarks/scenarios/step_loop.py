"""Issue 16: what a step costs as a run's body grows, on PostgreSQL.

A workflow whose body is a loop of N no-op sync steps (``for i in range(n):
noop(i)``, :mod:`benchmarks.live_flows`) runs on one worker process (a real
``Worker`` with default options, in a process of its own). The harness starts
one run at a time and waits for its result: wall clock from just before
``start()`` to ``result()`` returning. Per size: that total, the time per step
(total / N) and its ratio to the per-step time of the smallest size (the
base, N=10, averaged over ``profile.step_loop_base_runs`` runs; every other
size runs once). An engine that replays the body from its start at every step
does O(N) work per step, so its per-step time grows with N; one that keeps
the body live between steps does not (target: at most 1.2x the base at
N=10,000). A run that takes longer than ``profile.step_loop_timeout`` is
cancelled, noted, and the larger sizes are skipped.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.context import Bench
from benchmarks.live_flows import step_loop
from benchmarks.results import Measurement
from benchmarks.scenarios.live_worker import WorkerProcess
from benchmarks.systems import QUERATOR
from querator import Querator
from querator.errors import RequestTimeout

SCENARIO = "step_loop"
TARGET_SIZE = 10_000
TARGET_RATIO = 1.2
"""Issue 16: the per-step time at N=10,000 at most 1.2x the one at N=10."""
WARM_RUNS = 2
"""Untimed runs of the base size first (the worker's first run pays its imports)."""


def run(bench: Bench) -> None:
    """Per-step time by size of the loop (querator only; no peer runs it)."""
    if QUERATOR not in bench.systems:
        return
    bench.guarded("step_loop/querator", lambda: _measure(bench))


def _case(n: int) -> str:
    return f"loop of N={n:,} no-op sync steps, 1 worker process"


def _one(bench: Bench, q: Querator, worker: WorkerProcess, n: int) -> float | None:
    """Seconds from ``start()`` to the result of one run of ``n`` steps (None: timed out,
    the run was cancelled)."""
    timeout = bench.profile.step_loop_timeout
    began = time.monotonic()
    handle = q.start(step_loop, n)
    try:
        result = handle.result(timeout=timeout)
    except RequestTimeout:
        handle.cancel("step_loop: timed out")
        worker.check()
        bench.note(
            f"step_loop: N={n:,} did not finish within {timeout:.0f} s (run cancelled); "
            "it and the larger sizes have no figures"
        )
        return None
    took = time.monotonic() - began
    if result != n:
        raise RuntimeError(f"a run of {n} steps returned {result!r}")
    return took


def _measure(bench: Bench) -> None:
    profile = bench.profile
    sizes = profile.step_loop_sizes
    base = sizes[0]
    with (
        bench.fresh_database(QUERATOR) as dsn,
        tempfile.TemporaryDirectory(prefix="qbench-loop-") as work,
        Querator(dsn) as q,
        WorkerProcess(dsn, "step_loop", Path(work) / "worker.log") as worker,
    ):
        worker.wait_serving(q)
        for _ in range(WARM_RUNS):
            if _one(bench, q, worker, base) is None:
                return
        base_step: float | None = None
        for n in sizes:
            runs = profile.step_loop_base_runs if n == base else 1
            cpu = worker.cpu_seconds()
            totals: list[float] = []
            for _ in range(runs):
                took = _one(bench, q, worker, n)
                if took is None:
                    break
                totals.append(took)
            if len(totals) < runs:
                break
            cpu = worker.cpu_seconds() - cpu
            total = statistics.fmean(totals)
            per_step = total * 1000 / n
            base_step = base_step or per_step
            detail = {
                "steps": n,
                "runs": runs,
                "seconds_each": [round(t, 4) for t in totals],
                "worker_cpu_ms_per_step": round(cpu * 1000 / n / runs, 4),
            }
            _add(bench, n, "s start() -> result", [total], detail)
            _add(bench, n, "ms per step", [per_step], detail)
            _add(bench, n, f"x N={base}'s per-step time", [per_step / base_step], detail)
        code, took = worker.stop()
        bench.log(f"  step_loop: worker stopped (exit status {code}) in {took:.1f} s")
    _verdict(bench, base)


def _add(bench: Bench, n: int, metric: str, values: list[float], detail: dict[str, object]) -> None:
    bench.add(Measurement(SCENARIO, _case(n), QUERATOR.name, metric, "lower", values, detail))


def _verdict(bench: Bench, base: int) -> None:
    """A note on the target (as spark_stages notes its own)."""
    ratios = {
        int(m.detail["steps"]): m.value
        for m in bench.measurements
        if m.scenario == SCENARIO and m.metric.startswith("x N=")
    }
    if not ratios:
        return
    largest = max(ratios)
    ratio = ratios[largest]
    if largest < TARGET_SIZE:
        verdict = f"not measured (the target is at N={TARGET_SIZE:,})"
    else:
        verdict = "met" if ratio <= TARGET_RATIO else "MISSED"
    bench.note(
        f"step_loop: per-step time at N={largest:,} is {ratio:.2f}x N={base}'s; "
        f"target <= {TARGET_RATIO}x at N={TARGET_SIZE:,}: {verdict}"
    )
