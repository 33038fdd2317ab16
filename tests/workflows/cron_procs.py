"""A scheduler process for the cron tests: ``python cron_procs.py URL SECONDS``."""

from __future__ import annotations

import sys
import threading

from querator import Querator
from querator.workflows.cron.scheduler import Scheduler


def main(url: str, seconds: float) -> None:
    with Querator(url) as q:
        scheduler = Scheduler(q, interval=1.0)
        threading.Timer(seconds, scheduler.stop).start()
        scheduler.run()


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
