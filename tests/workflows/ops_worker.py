"""A worker process for the operations tests.

Usage: python ops_worker.py URL CLIENT_ID [--concurrency N] [--grace S]
       [--maintenance S] [--poll S] [--nice N]

Serves every workflow and step of ``ops_flows`` with :class:`Worker` until
SIGTERM/SIGINT; logs (INFO) to stderr. Steps write their lines to ``$OPS_LOG``
and tag them with ``$OPS_WORKER`` (set to CLIENT_ID here).
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

# tests/ on sys.path, as pytest puts it: the flows are ``workflows.ops_flows`` here too.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from querator import Querator
from querator.workflows import StepFunction, Worker, WorkflowFunction
from workflows import ops_flows

FUNCTIONS: list[StepFunction[..., Any] | WorkflowFunction[..., Any]] = [
    ops_flows.chain,
    ops_flows.mailbox,
    ops_flows.awaiting,
    ops_flows.link,
    ops_flows.napping,
    ops_flows.napping_twice,
    ops_flows.nap,
    ops_flows.stalling,
    ops_flows.stall,
    ops_flows.greet,
    ops_flows.hello,
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("client_id")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--grace", type=float, default=30.0)
    parser.add_argument("--maintenance", type=float, default=0.5)
    parser.add_argument("--poll", type=float, default=1.0)
    parser.add_argument("--nice", type=int, default=10)
    args = parser.parse_args()
    # Chaos workers yield the CPU to the test processes beside them, whose
    # timing-sensitive tests (short leases) would otherwise starve on small machines.
    os.nice(args.nice)
    os.environ["OPS_WORKER"] = args.client_id
    # A hung worker's threads, on SIGUSR1 (``WorkerProc.wait`` asks before killing it).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    with Querator(args.url, maintenance_interval=args.maintenance) as q:
        Worker(
            q,
            FUNCTIONS,
            concurrency=args.concurrency,
            client_id=args.client_id,
            poll_timeout=args.poll,
            shutdown_grace=args.grace,
        ).run()


if __name__ == "__main__":
    main()
