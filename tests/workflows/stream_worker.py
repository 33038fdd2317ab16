"""A worker process serving ``stream_flows`` until SIGTERM: ``python
stream_worker.py URL CLIENT_ID`` (logs to stderr)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from querator import Querator
from querator.workflows import Worker
from workflows import stream_flows


def main() -> None:
    url, client_id = sys.argv[1], sys.argv[2]
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    functions = [
        stream_flows.progress,
        stream_flows.tokens,
        stream_flows.async_flow,
        stream_flows.atokens,
    ]
    with Querator(url, maintenance_interval=0.5) as q:
        Worker(q, functions, client_id=client_id, poll_timeout=1.0, shutdown_grace=10.0).run()


if __name__ == "__main__":
    main()
