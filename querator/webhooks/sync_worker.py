"""``DeliveryWorker``: the delivery worker on a sync :class:`~querator.Querator`,
stopped by SIGTERM/SIGINT (see :mod:`querator.webhooks.worker` for what it does)."""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

from querator.queue.client import QueueClient
from querator.webhooks.settings import WebhookSettings
from querator.webhooks.worker import DEFAULT_SHUTDOWN_GRACE, AsyncDeliveryWorker

__all__ = ["DeliveryWorker"]

log = logging.getLogger("querator.webhooks")


class DeliveryWorker:
    """The delivery worker on a sync :class:`QueueClient` (see :class:`AsyncDeliveryWorker`).

    :meth:`run` blocks until :meth:`stop`, or SIGTERM/SIGINT when called in
    the main thread.
    """

    def __init__(
        self,
        q: QueueClient,
        settings: WebhookSettings | None = None,
        *,
        concurrency: int = 200,
        client_id: str | None = None,
        shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE,
        endpoint_ttl: float = 2.0,
    ) -> None:
        self.q = q
        self.worker = AsyncDeliveryWorker(
            q.aio,
            settings,
            concurrency=concurrency,
            client_id=client_id,
            shutdown_grace=shutdown_grace,
            endpoint_ttl=endpoint_ttl,
        )

    def run(self) -> None:
        """Deliver until :meth:`stop` (or SIGTERM/SIGINT in the main thread)."""
        if threading.current_thread() is not threading.main_thread():
            self.q.call(self.worker.arun)
            return
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            self.q.call(self.worker.arun)
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        log.info("webhooks: worker %s: signal %d, stopping", self.worker.client_id, signum)
        threading.Thread(target=self.stop, daemon=True).start()

    def stop(self) -> None:
        """Ask :meth:`run` to return after a graceful shutdown."""
        self.worker.stop()
