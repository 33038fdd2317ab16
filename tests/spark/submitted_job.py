"""The PySpark application the submission tests run with ``spark-submit``.

Usage: submitted_job.py OUTPUT ROOT ROWS

Appends ``<tag> <pid>`` to ``ROOT/counts/job.log`` as it starts (one line per
job ever launched). Exits 3 before starting Spark while that file has no more
lines than ``ROOT/fail-jobs`` says; waits while ``ROOT/job-gate`` exists
(writing ``ROOT/job-waiting``); then writes ROWS rows to OUTPUT as Parquet
(ROWS 0: only an ``OUTPUT/empty`` file, without starting Spark).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def main() -> int:
    output, root, rows = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    counts = root / "counts"
    counts.mkdir(parents=True, exist_ok=True)
    with open(counts / "job.log", "a") as f:
        f.write(f"{os.environ.get('QUERATOR_SUBMISSION_TAG')} {os.getpid()}\n")
    launched = len((counts / "job.log").read_text().splitlines())
    fail = root / "fail-jobs"
    if fail.exists() and launched <= int(fail.read_text()):
        print("submitted job: failing as told", file=sys.stderr)
        return 3
    gate = root / "job-gate"
    if gate.exists():
        (root / "job-waiting").write_text(str(os.getpid()))
        give_up = time.monotonic() + 120
        while gate.exists() and time.monotonic() < give_up:
            time.sleep(0.05)
    if rows == 0:
        Path(output).mkdir(parents=True, exist_ok=True)
        (Path(output) / "empty").touch()
        return 0
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    try:
        spark.range(rows).selectExpr("id", "id * 2 AS twice").write.mode("overwrite").parquet(
            output
        )
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
