"""Instrumented Spark stages for the tests: every attempt appends a line to
``{root}/counts/{stage}.log`` so tests can tell which stages ran how often."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from querator.spark import SparkStage, delete_output, spark_step
from querator.workflows import RetryPolicy, StepFunction, WorkflowFunction, saga, step, workflow

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import spark_pipeline

example = spark_pipeline
"""examples/spark_pipeline.py, for the tests (they import it from here: this module
puts examples/ on sys.path)."""
Flows = list[StepFunction[..., Any] | WorkflowFunction[..., Any]]
"""What a worker serves (a list mixing workflows and steps)."""

FAST = RetryPolicy(max_attempts=3, initial=0.05, jitter=False)
LOCAL_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "512m",
    "spark.sql.adaptive.enabled": "false",
}


def note(root: str, name: str, stage: SparkStage) -> int:
    """Append this attempt to the stage's counter file; returns the lines now in it."""
    counts = Path(root) / "counts"
    counts.mkdir(parents=True, exist_ok=True)
    with open(counts / f"{name}.log", "a") as f:
        f.write(f"{os.getpid()} attempt={stage.attempt}\n")
    return len((counts / f"{name}.log").read_text().splitlines())


def counts(root: str | Path, name: str) -> int:
    path = Path(root) / "counts" / f"{name}.log"
    return len(path.read_text().splitlines()) if path.exists() else 0


@spark_step(name="t.ingest", retry=FAST, lease_timeout=3.0)
def t_ingest(stage: SparkStage, raw_dir: str, root: str) -> int:
    note(root, "ingest", stage)
    example.read_raw(stage.spark, raw_dir).write.mode("overwrite").parquet(stage.output_path)
    return stage.spark.read.parquet(stage.output_path).count()


@spark_step(name="t.clean", retry=FAST, lease_timeout=3.0)
def t_clean(stage: SparkStage, bronze: str, root: str) -> int:
    note(root, "clean", stage)
    df = example.clean_events(stage.spark.read.parquet(stage.input(bronze)))
    df.write.mode("overwrite").parquet(stage.output_path)
    gate = Path(root) / "gate"
    if gate.exists():  # the crash test kills the worker here, staging half-done
        (Path(root) / "clean-waiting").write_text(str(os.getpid()))
        give_up = time.monotonic() + 120
        while gate.exists() and time.monotonic() < give_up:
            time.sleep(0.05)
    return stage.spark.read.parquet(stage.output_path).count()


@spark_step(name="t.aggregate", retry=FAST, lease_timeout=3.0)
def t_aggregate(stage: SparkStage, silver: str, root: str) -> int:
    note(root, "aggregate", stage)
    report = example.aggregate_events(stage.spark.read.parquet(stage.input(silver)))
    report.coalesce(1).write.mode("overwrite").parquet(stage.output_path)
    return stage.spark.read.parquet(stage.output_path).count()


@workflow(name="t.pipeline")
def t_pipeline(raw_dir: str, root: str) -> dict[str, Any]:
    raw_rows = t_ingest(raw_dir, root, output=f"{root}/bronze")
    clean_rows = t_clean(f"{root}/bronze", root, output=f"{root}/silver")
    report_rows = t_aggregate(f"{root}/silver", root, output=f"{root}/report")
    return {"raw_rows": raw_rows, "clean_rows": clean_rows, "report_rows": report_rows}


PIPELINE: Flows = [t_pipeline, t_ingest, t_clean, t_aggregate]


@spark_step(name="spark.t.flaky", retry=RetryPolicy(max_attempts=3, initial=0.05, jitter=False))
def t_flaky(stage: SparkStage, root: str, fail_times: int) -> int:
    n = note(root, "flaky", stage)
    if n <= fail_times:
        stage.spark.sql("SELECT raise_error('flaky stage fails')").collect()  # a real job failure
    stage.spark.range(10).write.mode("overwrite").parquet(stage.output_path)
    return n


@workflow(name="spark.t.flaky_flow")
def t_flaky_flow(root: str, fail_times: int) -> int:
    return t_flaky(root, fail_times, output=f"{root}/flaky")


def sleep_job(stage: SparkStage, seconds: float, tasks: int = 2) -> int:
    """A Spark job whose tasks sleep (in the JVM: interruptible by a cancel)."""
    millis = int(seconds * 1000)
    df = stage.spark.range(tasks).repartition(tasks)
    return len(df.selectExpr(f"reflect('java.lang.Thread', 'sleep', bigint({millis}))").collect())


@spark_step(
    name="spark.t.slow",
    retry=RetryPolicy(max_attempts=1),
    lease_timeout=1.5,
    progress_interval=0.2,
)
def t_slow(stage: SparkStage, root: str, seconds: float) -> int:
    note(root, "slow", stage)
    return sleep_job(stage, seconds)


@workflow(name="spark.t.slow_flow")
def t_slow_flow(root: str, seconds: float) -> int:
    return t_slow(root, seconds)


@workflow(name="t.slow_timeout_flow", timeout=4.0)
def t_slow_timeout_flow(root: str, seconds: float) -> int:
    return t_slow(root, seconds)


@spark_step(name="t.slow_step_timeout", retry=RetryPolicy(max_attempts=1), timeout=1.5)
def t_slow_step_timeout(stage: SparkStage, root: str, seconds: float) -> int:
    note(root, "slow_step_timeout", stage)
    return sleep_job(stage, seconds)


@workflow(name="t.step_timeout_flow")
def t_step_timeout_flow(root: str, seconds: float) -> int:
    return t_slow_step_timeout(root, seconds)


@spark_step(name="t.publish")
def t_publish(stage: SparkStage, root: str) -> int:
    note(root, "publish", stage)
    stage.spark.range(5).write.mode("overwrite").parquet(stage.output_path)
    return 5


@t_publish.compensate(name="t.publish.undo", retry=FAST)
def t_unpublish(root: str, rows: int | None, *, output: str | None) -> bool:
    """Delete what the stage published (its arguments, its result, then ``output=``)."""
    assert output is not None
    (Path(root) / "counts").mkdir(exist_ok=True)
    with open(Path(root) / "counts" / "unpublish.log", "a") as f:
        f.write(f"{rows}\n")
    return delete_output(output)


@step(name="t.refuse", retry=RetryPolicy(max_attempts=1))
def t_refuse(reason: str) -> None:
    raise RuntimeError(reason)


@saga(name="t.publish_saga")
def t_publish_saga(root: str) -> int:
    rows = t_publish(root, output=f"{root}/published")
    t_refuse("downstream refused the report")
    return rows


SAGA: Flows = [t_publish_saga, t_publish, t_refuse]


@spark_step(name="t.numbers", retry=FAST)
def t_numbers(stage: SparkStage, rows: int) -> int:
    """``rows`` numbers, 0 to rows - 1."""
    stage.spark.range(rows).write.mode("overwrite").parquet(stage.output_path)
    return rows


@spark_step(name="t.total", retry=RetryPolicy(max_attempts=1))
def t_total(stage: SparkStage, numbers: str) -> int:
    """The sum of a committed ``numbers`` output, also written as a one-row output."""
    total = stage.spark.read.parquet(stage.input(numbers)).selectExpr("sum(id) AS total")
    total.write.mode("overwrite").parquet(stage.output_path)
    return int(stage.spark.read.parquet(stage.output_path).first()["total"])  # type: ignore[index]


@workflow(name="t.numbers_flow")
def t_numbers_flow(root: str, rows: int) -> list[int]:
    """Writes ``root/numbers`` twice (the second commit replaces the first), then sums it."""
    first = t_numbers(rows, output=f"{root}/numbers")
    second = t_numbers(rows + 1, output=f"{root}/numbers")
    return [first, second, t_total(f"{root}/numbers", output=f"{root}/total")]


@workflow(name="t.total_flow")
def t_total_flow(numbers: str, root: str) -> int:
    return t_total(numbers, output=f"{root}/total")


NUMBERS: Flows = [t_numbers_flow, t_total_flow, t_numbers, t_total]
