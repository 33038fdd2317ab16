"""Issue 16: a worker's memory while runs are parked on a durable sleep, on PostgreSQL.

One worker process (a real ``Worker`` with default options, in a process of
its own) serves a workflow that calls a no-op step, then
``querator.workflows.sleep(3600)``, then the step again
(:mod:`benchmarks.live_flows`). Once the worker serves (its queues exist, plus
a second), the harness reads its RSS (``VmRSS`` of /proc/<pid>/status), starts
``profile.parked_runs`` runs (1,000) and polls the results queue until every
run has its first step's record (``{run}/0``) and its timer's (``{run}/1``,
step ``querator.sleep``), then reads the RSS again: the difference per parked
run is what a sleeping run costs a worker. An engine that ends a run's body at
a sleep and replays it when the timer fires keeps nothing; one that keeps
bodies live between steps keeps whatever a parked body holds. The worker is
then stopped with SIGTERM.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks.context import Bench
from benchmarks.live_flows import parked
from benchmarks.results import Measurement
from benchmarks.scenarios.live_worker import WorkerProcess
from benchmarks.systems import QUERATOR
from benchmarks.systems.base import Deadline
from querator import Querator
from querator.workflows.keys import RESULTS_QUEUE, SLEEP_STEP, step_key
from querator.workflows.stored import StepRecord

SCENARIO = "parked"
POLL = 0.25
"""Seconds between two looks at the records."""
RUNS_PER_LOOKUP = 500
"""Runs looked up per ``lookup`` call (two keys each; a call takes at most 1,000)."""


def run(bench: Bench) -> None:
    """Worker RSS before and with the runs parked (querator only; no peer runs it)."""
    if QUERATOR not in bench.systems:
        return
    bench.guarded("parked/querator", lambda: _measure(bench))


def _unparked(q: Querator, run_ids: list[str]) -> list[str]:
    """The runs of ``run_ids`` without both their first step's and their timer's record."""
    left: list[str] = []
    for index in range(0, len(run_ids), RUNS_PER_LOOKUP):
        chunk = run_ids[index : index + RUNS_PER_LOOKUP]
        found = q.lookup(RESULTS_QUEUE, [step_key(r, p) for r in chunk for p in (0, 1)])
        for run_id in chunk:
            first, timer = found.get(step_key(run_id, 0)), found.get(step_key(run_id, 1))
            if first is None or timer is None:
                left.append(run_id)
                continue
            if not StepRecord.model_validate_json(first.payload).ok:
                raise RuntimeError(f"run {run_id}: its first step failed")
            record = StepRecord.model_validate_json(timer.payload)
            if record.step != SLEEP_STEP:
                raise RuntimeError(f"run {run_id}: record 1 is {record.step!r}, not a timer")
    return left


def _measure(bench: Bench) -> None:
    runs = bench.profile.parked_runs
    timeout = bench.profile.parked_timeout
    with (
        bench.fresh_database(QUERATOR) as dsn,
        tempfile.TemporaryDirectory(prefix="qbench-parked-") as work,
        Querator(dsn) as q,
        WorkerProcess(dsn, "parked", Path(work) / "worker.log") as worker,
    ):
        worker.wait_serving(q)
        idle = worker.rss_kib()
        began = time.monotonic()
        pending = [q.start(parked).run_id for _ in range(runs)]
        started = time.monotonic() - began
        deadline = Deadline(timeout)
        while pending := _unparked(q, pending):
            worker.check()
            if deadline.passed():
                raise RuntimeError(
                    f"{len(pending):,} of {runs:,} runs not parked {timeout:.0f} s after "
                    "the last start"
                )
            time.sleep(POLL)
        took = time.monotonic() - began
        loaded = worker.rss_kib()
        code, stopping = worker.stop()
    bench.log(f"  parked: worker stopped (exit status {code}) in {stopping:.1f} s")
    detail = {
        "runs": runs,
        "rss_idle_kib": idle,
        "rss_parked_kib": loaded,
        "seconds_to_start": round(started, 3),
        "seconds_to_park": round(took, 3),
        "stop_seconds": round(stopping, 3),
        "stop_exit_status": code,
    }
    rows = (
        ("worker RSS, serving, before the runs", "MiB", idle / 1024),
        (f"worker RSS, {runs:,} runs parked on sleep(3600)", "MiB", loaded / 1024),
        ("worker RSS growth per parked run", "KiB per run", (loaded - idle) / runs),
    )
    for case, metric, value in rows:
        bench.add(Measurement(SCENARIO, case, QUERATOR.name, metric, "lower", [value], detail))
    if code != 0:
        bench.note(f"parked: the worker's exit status after SIGTERM was {code} (None: killed)")
