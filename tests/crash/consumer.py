"""A consumer process for the crash tests: lease, note, complete, forever.

Usage: python consumer.py URL QUEUE LOG_PATH CLIENT_ID

For every item it appends ``start <id>`` to LOG_PATH before working and
``done <id>`` after ``complete`` returned, each line flushed at once, so the
parent can tell what a SIGKILL interrupted.
"""

from __future__ import annotations

import os
import sys
import time

from querator import Querator
from querator.errors import Conflict, RequestTimeout


def main() -> None:
    url, queue, log_path, client_id = sys.argv[1:5]
    with Querator(url, maintenance_interval=0.5) as q, open(log_path, "a", buffering=1) as log:
        while True:
            try:
                batch = q.lease(queue, client_id=client_id, batch_size=3, timeout=1.0)
            except RequestTimeout:
                continue
            for item in batch:
                log.write(f"start {item.id}\n")
                time.sleep(0.002)  # the "work": a window in which a kill can land
            try:
                q.complete(queue, batch)
            except Conflict:
                continue  # our lease expired and someone else has the items now
            for item in batch:
                log.write(f"done {item.id}\n")
            os.fsync(log.fileno())


if __name__ == "__main__":
    main()
