"""Issue 8: querator's orchestration overhead per Spark stage, on PostgreSQL.

A warm worker process (``Worker(q, fns, resources={"spark": SparkResource("local[2]")})``,
its SparkSession started by two untimed runs) serves a workflow of four tiny
``@spark_step`` stages, each reading the previous one's committed output. The
harness starts the runs one at a time and waits for each. For every stage
boundary it takes the previous stage's commit (``committed_at`` of its
``_COMMITTED`` marker: set when the stage function has returned, just before its
output is renamed into place and its result recorded) and the next stage's
first Spark job (``time.time()`` taken by the stage function right before the
call that starts it). The difference is what querator adds between two stages:
the output commit, the step's transaction, the wake task, the replay of the
body, the next step item (produce, lease, lookups) and the stage's setup
(commit check, staging, job group). Same machine, same wall clock; no
SparkListener needed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.context import Bench
from benchmarks.results import Measurement
from benchmarks.stats import median, percentile
from benchmarks.systems import QUERATOR
from querator import Querator
from querator.spark import LocalStorage, SparkResource, SparkStage, read_marker, spark_step
from querator.workflows import StepFunction, Worker, WorkflowFunction, start, workflow

SCENARIO = "spark_stages"
STAGES = 4
TARGET_MS = 200.0
"""Issue 8: previous stage's commit -> next stage's Spark job, warm worker."""
WARM_RUNS = 2
RESULT_TIMEOUT = 300.0
"""Seconds one run may take (the first one starts the SparkSession)."""
SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "512m",
}
ROOT = Path(__file__).resolve().parents[2]


@spark_step(name="qbench.spark_stage", lease_timeout=60)
def spark_stage(stage: SparkStage, previous: str | None, rows: int) -> list[float]:
    """A tiny stage: ``rows`` numbers, or the previous stage's plus one.

    Returns ``[entered, first_job]``: wall-clock instants of its first line and
    of the moment right before its first Spark job starts.
    """
    entered = time.time()
    assert stage.output is not None
    spark = stage.spark
    if previous is None:
        first_job = time.time()
        df = spark.range(rows)
    else:
        path = stage.input(previous)
        first_job = time.time()  # reading Parquet starts a job (schema from the footers)
        df = spark.read.parquet(path)
    df.selectExpr("id + 1 AS id").write.mode("overwrite").parquet(stage.output)
    return [entered, first_job]


@workflow(name="qbench.spark_pipeline")
def spark_pipeline(root: str, rows: int) -> list[list[float]]:
    """``STAGES`` stages in a row, each reading the previous one's output."""
    stamps: list[list[float]] = []
    previous: str | None = None
    for index in range(STAGES):
        output = f"{root}/stage{index}"
        stamps.append(spark_stage(previous, rows, output=output))
        previous = output
    return stamps


FUNCTIONS: list[StepFunction[..., Any] | WorkflowFunction[..., Any]] = [spark_pipeline, spark_stage]


def serve(dsn: str) -> None:
    """The worker process: serves the pipeline until SIGTERM."""
    with Querator(dsn) as q:
        resource = SparkResource(master="local[2]", conf=SPARK_CONF, app_name="qbench-spark")
        Worker(q, FUNCTIONS, resources={"spark": resource}).run()


def run(bench: Bench) -> None:
    """Per-stage overhead of querator (when chosen and pyspark is installed)."""
    if QUERATOR not in bench.systems:
        return
    if importlib.util.find_spec("pyspark") is None:
        bench.note("spark_stages: pyspark is not installed (querator[spark]); skipped")
        return
    bench.guarded("spark_stages/querator", lambda: _measure(bench))


def _runs(bench: Bench) -> int:
    return max(3, min(12, bench.profile.latency_samples // 25))


@contextlib.contextmanager
def _worker(dsn: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The worker process, its output in ``log``; stopped with SIGTERM at the end."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", f"from {__name__} import serve; serve({dsn!r})"],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its JVM is in its group
        )
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def _measure(bench: Bench) -> None:
    runs = _runs(bench)
    to_job: list[float] = []
    to_entry: list[float] = []
    whole: list[float] = []
    with (
        bench.fresh_database(QUERATOR) as dsn,
        tempfile.TemporaryDirectory(prefix="qbench-spark-") as work,
        Querator(dsn) as q,
        _worker(dsn, Path(work) / "worker.log") as proc,
    ):
        for index in range(WARM_RUNS + runs):
            root = f"{work}/run{index}"
            began = time.monotonic()
            handle = start(q, spark_pipeline, root, 16)
            try:
                stamps = handle.result(timeout=RESULT_TIMEOUT)
            except Exception:
                alive = "running" if proc.poll() is None else f"exited {proc.returncode}"
                bench.log(f"spark worker ({alive}) log tail:\n{_tail(Path(work) / 'worker.log')}")
                raise
            took = time.monotonic() - began
            if index < WARM_RUNS:
                bench.log(f"  warm-up run {index + 1}: {took:.1f} s")
                continue
            whole.append(took * 1000)
            storage = LocalStorage()
            for stage in range(1, STAGES):
                marker = read_marker(storage, f"{root}/stage{stage - 1}")
                assert marker is not None, f"stage {stage - 1} of {root} is not committed"
                committed = marker.committed_at.timestamp()
                to_entry.append((stamps[stage][0] - committed) * 1000)
                to_job.append((stamps[stage][1] - committed) * 1000)
    _report(bench, runs, to_job, to_entry, whole)


def _report(
    bench: Bench, runs: int, to_job: list[float], to_entry: list[float], whole: list[float]
) -> None:
    detail = {"samples": len(to_job), "runs": runs, "stages": STAGES, "worker": "warm, local[2]"}
    series = {
        "previous stage commit -> next stage's first Spark job (warm worker)": to_job,
        "previous stage commit -> next stage function entered": to_entry,
    }
    for case, values in series.items():
        for label, pct in (("p50", 50.0), ("p99", 99.0)):
            bench.add(
                Measurement(
                    SCENARIO,
                    case,
                    QUERATOR.name,
                    f"ms latency {label}",
                    "lower",
                    [percentile(values, pct)],
                    detail,
                )
            )
    bench.add(
        Measurement(
            SCENARIO,
            f"{STAGES}-stage run of tiny stages, start() -> result",
            QUERATOR.name,
            "ms per run",
            "lower",
            whole,
            {"runs": runs},
        )
    )
    p50, p99 = percentile(to_job, 50.0), percentile(to_job, 99.0)
    verdict = "met" if p99 < TARGET_MS else ("met at p50 only" if p50 < TARGET_MS else "MISSED")
    bench.note(
        f"spark_stages: per-stage orchestration overhead p50 {p50:.1f} ms, p99 {p99:.1f} ms "
        f"(median of the runs' {median(whole):.0f} ms); target < {TARGET_MS:.0f} ms: {verdict}"
    )


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
