"""A worker process for the Spark crash tests: serves the instrumented pipeline,
or the stage that submits its job with spark-submit.

Usage: python worker_proc.py SQLITE_URL [pipeline|submit]
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

# tests/ on sys.path, as pytest puts it: the flows are ``spark.flows`` here too.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from querator import Querator
from querator.spark import SparkResource
from querator.workflows import Worker
from spark.flows import LOCAL_CONF, PIPELINE
from spark.submit_flows import SUBMIT

FUNCTIONS = {"pipeline": PIPELINE, "submit": SUBMIT}


def main() -> None:
    logging.basicConfig(format="%(asctime)s %(process)d %(name)s %(message)s")
    logging.getLogger("querator.spark").setLevel(logging.INFO)
    functions = FUNCTIONS[sys.argv[2] if len(sys.argv) > 2 else "pipeline"]
    with Querator(sys.argv[1]) as q:
        resource = SparkResource(master="local[2]", conf=LOCAL_CONF)
        Worker(q, functions, poll_timeout=0.5, resources={"spark": resource}).run()


if __name__ == "__main__":
    main()
