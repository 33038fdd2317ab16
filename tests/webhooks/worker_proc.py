"""A delivery worker process for the crash tests: ``python worker_proc.py URL``."""

from __future__ import annotations

import logging
import sys

from querator import Querator
from querator.webhooks import DeliveryWorker, WebhookSettings

SETTINGS = WebhookSettings(
    schedule=(0.0, 0.1, 0.1), jitter=0.0, timeout=30.0, connect_timeout=1.0, allow_private=True
)


def main(url: str) -> None:
    """Deliver until SIGTERM (or SIGKILL)."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    with Querator(url) as q:
        DeliveryWorker(q, SETTINGS, endpoint_ttl=0.2).run()


if __name__ == "__main__":
    main(sys.argv[1])
