"""``DeliveryWorker``: the delivery worker on a sync :class:`~querator.Querator`,
stopped by SIGTERM/SIGINT (see :mod:`querator.webhooks.worker` for what it does)."""

from __future__ import annotations

import logging

from typing_extensions import Unpack

from querator.queue.client import QueueClient
from querator.queue.harness import run_sync
from querator.webhooks.settings import WebhookSettings
from querator.webhooks.worker import AsyncDeliveryWorker, DeliveryWorkerOptions

__all__ = ["DeliveryWorker"]

log = logging.getLogger("querator.webhooks")


class DeliveryWorker:
    """The delivery worker on a sync :class:`QueueClient` (see :class:`AsyncDeliveryWorker`).

    :meth:`run` blocks until :meth:`stop`, or SIGTERM/SIGINT when called in
    the main thread: the first signal stops gracefully, a second one gives
    the deliveries still in flight back at once.
    """

    def __init__(
        self,
        q: QueueClient,
        settings: WebhookSettings | None = None,
        **options: Unpack[DeliveryWorkerOptions],
    ) -> None:
        self.q = q
        self.worker = AsyncDeliveryWorker(q.aio, settings, **options)

    def run(self) -> None:
        """Deliver until :meth:`stop` (or SIGTERM/SIGINT in the main thread)."""
        run_sync(
            self.q, self.worker.arun, self.stop, log, f"webhooks: worker {self.worker.client_id}"
        )

    def stop(self) -> None:
        """Ask :meth:`run` to return after a graceful shutdown (again: hurry)."""
        self.worker.stop()
