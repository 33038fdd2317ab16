"""A worker process for the concurrency-limit tests.

Usage: python limited_worker.py URL CLIENT_ID  (``$LIMITS_LOG``: the shared log)
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from limits import limited_flows
from querator import Querator
from querator.workflows import DurableFunction, Worker


def main() -> None:
    url, client_id = sys.argv[1:3]
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    with Querator(url) as q:
        served: list[DurableFunction] = [limited_flows.burst, limited_flows.shared]
        Worker(q, served, client_id=client_id, concurrency=8).run()


if __name__ == "__main__":
    main()
