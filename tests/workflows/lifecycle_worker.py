"""A worker process for the child-run tests.

Usage: python lifecycle_worker.py URL CLIENT_ID [--concurrency N]

Serves every workflow of ``lifecycle_flows``. Logs (INFO) to stderr.
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import signal
import sys
from pathlib import Path

# tests/ on sys.path, as pytest puts it: the flows are ``workflows.lifecycle_flows`` here too.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from querator import Querator
from querator.workflows import Worker
from workflows import lifecycle_flows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("client_id")
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    os.environ["OPS_WORKER"] = args.client_id
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    with Querator(args.url) as q:
        worker = Worker(
            q,
            lifecycle_flows.FLOWS,
            client_id=args.client_id,
            concurrency=args.concurrency,
            poll_timeout=1.0,
        )
        worker.run()


if __name__ == "__main__":
    main()
