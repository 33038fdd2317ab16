"""A consumer process for the multi-process tests (run as a script, not collected).

Usage: ``python lease_worker.py URL QUEUE CLIENT_ID``. It opens a client, prints
``ready``, waits for a line on stdin (so that all workers start together), then
leases and completes until a long poll finds nothing, and prints one JSON line:
the list of ``[id, version]`` pairs it leased.
"""

from __future__ import annotations

import json
import sys

from querator import Querator
from querator.errors import RequestTimeout


def main(url: str, queue: str, client_id: str) -> int:
    leased: list[tuple[str, int]] = []
    with Querator(url) as q:
        print("ready", flush=True)
        sys.stdin.readline()
        while True:
            try:
                batch = q.lease(queue, client_id=client_id, batch_size=5, timeout=1.0)
            except RequestTimeout:
                break
            leased.extend((item.id, item.version) for item in batch)
            q.complete(queue, batch)
    print(json.dumps(leased), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
