"""A worker process for the live-body tests.

Usage: python live_worker.py URL CLIENT_ID [--serve workflows|remote]
       [--max-live-runs N] [--poll S]

``workflows`` (the default) lists only the workflows of ``live_flows``: their
steps are found by name. ``remote`` serves only ``live.remote``. The worker
keeps its default lease and renewal settings. Logs (INFO) to stderr.
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

# tests/ on sys.path, as pytest puts it: the flows are ``workflows.live_flows`` here too.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from querator import Querator
from querator.workflows import DurableFunction, Worker
from workflows import live_flows

SERVED: dict[str, list[DurableFunction]] = {
    "workflows": [
        live_flows.loop,
        live_flows.napping_loop,
        live_flows.hop,
        live_flows.editable,
    ],
    "remote": [live_flows.remote],
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("client_id")
    parser.add_argument("--serve", choices=sorted(SERVED), default="workflows")
    parser.add_argument("--max-live-runs", type=int, default=None)
    parser.add_argument("--poll", type=float, default=None)
    args = parser.parse_args()
    os.environ["OPS_WORKER"] = args.client_id
    # A hung worker's threads, on SIGUSR1 (``WorkerProc.wait`` asks before killing it).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    options: dict[str, Any] = {}
    if args.max_live_runs is not None:
        options["max_live_runs"] = args.max_live_runs
    if args.poll is not None:
        options["poll_timeout"] = args.poll
    with Querator(args.url) as q:
        Worker(q, SERVED[args.serve], client_id=args.client_id, **options).run()


if __name__ == "__main__":
    main()
