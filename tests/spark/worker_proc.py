"""A worker process for the Spark crash test: serves the instrumented pipeline.

Usage: python worker_proc.py SQLITE_URL
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from querator import Querator
from querator.spark import SparkResource
from querator.workflows import Worker
from tests.spark.flows import LOCAL_CONF, PIPELINE


def main() -> None:
    with Querator(sys.argv[1]) as q:
        resource = SparkResource(master="local[2]", conf=LOCAL_CONF)
        Worker(q, PIPELINE, poll_timeout=0.5, resources={"spark": resource}).run()


if __name__ == "__main__":
    main()
