"""A three-stage Spark pipeline as a durable workflow, on local Spark and a SQLite store.

    python examples/spark_pipeline.py [work/dir]

Without a directory it works in a new temporary one, kept (the report is printed
with its path).

1. ``ingest``: reads the raw events this script generates (JSON lines and CSV)
   into one Parquet table;
2. ``clean``: drops malformed events and duplicates;
3. ``aggregate``: a per-day, per-type report, in Parquet.

Each stage is a ``@spark_step``: it gets the worker's SparkSession, reads the
committed output of the previous stage by path and writes its own output to a
staging path that is committed when it returns. Kill the worker at any point
and start it again: the run resumes at the stage that had not committed.
Where Spark runs comes from the environment (QUERATOR_SPARK_MASTER,
QUERATOR_SPARK_REMOTE, QUERATOR_SPARK_CONF); this script defaults to local[*].
"""

from __future__ import annotations

import csv
import json
import os
import random
import sys
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from querator import Querator
from querator.spark import SparkResource, SparkStage, spark_step
from querator.workflows import RetryPolicy, Worker, start, workflow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TYPES = ("view", "click", "purchase")
DAYS = ("2024-05-01", "2024-05-02", "2024-05-03")


def generate_events(n: int = 240, seed: int = 7) -> list[dict[str, Any]]:
    """Raw events: some duplicated (same event_id), some malformed (no user, negative amount)."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    for i in range(n):
        kind = rng.choice(TYPES)
        event: dict[str, Any] = {
            "event_id": f"e{i:04d}",
            "user": f"u{rng.randrange(25):02d}",
            "type": kind,
            "day": rng.choice(DAYS),
            "amount": round(rng.uniform(1, 100), 2) if kind == "purchase" else 0.0,
        }
        if i % 17 == 0:
            event["user"] = ""  # malformed: no user
        if i % 23 == 0 and kind == "purchase":
            event["amount"] = -event["amount"]  # malformed: negative amount
        events.append(event)
        if i % 5 == 0:
            events.append(dict(event))  # delivered twice
    return events


def write_raw(raw_dir: Path, events: list[dict[str, Any]]) -> None:
    """Half of the events as JSON lines, the other half as CSV."""
    raw_dir.mkdir(parents=True, exist_ok=True)
    half = len(events) // 2
    with open(raw_dir / "events.json", "w") as f:
        for event in events[:half]:
            f.write(json.dumps(event) + "\n")
    with open(raw_dir / "events.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(events[0]))
        writer.writeheader()
        writer.writerows(events[half:])


SCHEMA = "event_id STRING, user STRING, type STRING, day STRING, amount DOUBLE"


def read_raw(spark: SparkSession, raw_dir: str) -> DataFrame:
    as_json = spark.read.schema(SCHEMA).json(f"{raw_dir}/events.json")
    as_csv = spark.read.schema(SCHEMA).option("header", True).csv(f"{raw_dir}/events.csv")
    return as_json.unionByName(as_csv)


def clean_events(df: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    valid = (F.length(F.col("user")) > 0) & (F.col("amount") >= 0)
    return df.where(valid).dropDuplicates(["event_id"])


def aggregate_events(df: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return df.groupBy("day", "type").agg(
        F.count("*").alias("events"),
        F.countDistinct("user").alias("users"),
        F.round(F.sum("amount"), 2).alias("amount"),
    )


@spark_step(name="spark_pipeline.ingest", retry=RetryPolicy(max_attempts=3, initial=0.5))
def ingest(stage: SparkStage, raw_dir: str) -> int:
    df = read_raw(stage.spark, raw_dir)
    df.write.mode("overwrite").parquet(stage.output_path)
    return stage.spark.read.parquet(stage.output_path).count()


@spark_step(name="spark_pipeline.clean", retry=RetryPolicy(max_attempts=3, initial=0.5))
def clean(stage: SparkStage, bronze: str) -> int:
    df = clean_events(stage.spark.read.parquet(stage.input(bronze)))
    df.write.mode("overwrite").parquet(stage.output_path)
    return stage.spark.read.parquet(stage.output_path).count()


@spark_step(name="spark_pipeline.aggregate", retry=RetryPolicy(max_attempts=3, initial=0.5))
def aggregate(stage: SparkStage, silver: str) -> int:
    report = aggregate_events(stage.spark.read.parquet(stage.input(silver)))
    report.coalesce(1).write.mode("overwrite").parquet(stage.output_path)
    return stage.spark.read.parquet(stage.output_path).count()


@workflow(name="spark_pipeline.flow")
def pipeline(raw_dir: str, root: str) -> dict[str, Any]:
    """Paths in, paths out: no data passes through the workflow's state."""
    raw_rows = ingest(raw_dir, output=f"{root}/bronze")
    clean_rows = clean(f"{root}/bronze", output=f"{root}/silver")
    report_rows = aggregate(f"{root}/silver", output=f"{root}/report")
    return {
        "raw_rows": raw_rows,
        "clean_rows": clean_rows,
        "report_rows": report_rows,
        "report": f"{root}/report",
    }


FUNCTIONS = [pipeline, ingest, clean, aggregate]


def read_report(spark: SparkSession, path: str) -> list[tuple[str, str, int, int, float]]:
    rows = spark.read.parquet(path).orderBy("day", "type").collect()
    return [(r.day, r.type, r.events, r.users, r.amount) for r in rows]


def run_pipeline(q: Querator, work: Path, resource: SparkResource, key: str) -> dict[str, Any]:
    """Generate the raw events, run the pipeline with a worker in a thread, return its result."""
    write_raw(work / "raw", generate_events())
    worker = Worker(q, FUNCTIONS, concurrency=2, poll_timeout=1.0, resources={"spark": resource})
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        run = start(q, pipeline, str(work / "raw"), str(work / "out"), idempotency_key=key)
        result: dict[str, Any] = run.result(timeout=300)
    finally:
        worker.stop()
        thread.join()
    return result


def main() -> None:
    given = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="querator-spark-")
    work = Path(given).resolve()
    work.mkdir(parents=True, exist_ok=True)
    db = work / "querator.db"
    db.unlink(missing_ok=True)
    os.environ.setdefault("QUERATOR_SPARK_MASTER", "local[*]")
    resource = SparkResource(
        conf={
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "4",
        },
        stop_on_close=False,  # kept to print the report; stopped below
    )
    try:
        with Querator(f"sqlite:///{db}") as q:
            result = run_pipeline(q, work, resource, key=f"spark-pipeline-{os.getpid()}")
        print(f"raw rows: {result['raw_rows']}, clean rows: {result['clean_rows']}")
        print(f"report ({result['report_rows']} rows) at {result['report']}:")
        print(f"{'day':<12}{'type':<10}{'events':>7}{'users':>7}{'amount':>10}")
        for day, kind, events, users, amount in read_report(resource.session(), result["report"]):
            print(f"{day:<12}{kind:<10}{events:>7}{users:>7}{amount:>10.2f}")
    finally:
        resource.stop()


if __name__ == "__main__":
    main()
