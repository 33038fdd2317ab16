"""A worker process of the task tests.

Usage: python tasks_worker.py URL CLIENT_ID [--concurrency N]

Serves every task of ``app_tasks`` with the workflow :class:`Worker` until
SIGTERM; tasks write their lines to ``$TASKS_LOG`` tagged CLIENT_ID.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from querator import Querator
from querator.workflows import Worker
from tasks import app_tasks


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("client_id")
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    os.environ["TASKS_WORKER"] = args.client_id
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
    )
    with Querator(args.url, maintenance_interval=0.5) as q:
        Worker(
            q,
            app_tasks.ALL,
            client_id=args.client_id,
            concurrency=args.concurrency,
            poll_timeout=1.0,
            scheduler=False,
        ).run()


if __name__ == "__main__":
    main()
