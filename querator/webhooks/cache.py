"""The delivery worker's view of endpoints: cached, refreshed in one lookup."""

from __future__ import annotations

import logging
import time

import anyio

from querator.errors import QueratorError, Unavailable
from querator.queue.outage import Outage
from querator.queue.service import AsyncQueueClient
from querator.webhooks.endpoints import Endpoint
from querator.webhooks.layout import ENDPOINT_SLOTS

log = logging.getLogger("querator.webhooks")

__all__ = ["EndpointCache"]


class EndpointCache:
    """Endpoints by id as of at most ``ttl`` seconds ago (a change made elsewhere
    — disable, rotation, new URL — reaches the worker within ``ttl``)."""

    def __init__(self, aq: AsyncQueueClient, ttl: float) -> None:
        self.aq = aq
        self.ttl = ttl
        self._known: dict[str, Endpoint | None] = {}
        self._fetching: dict[str, anyio.Event] = {}

    async def get(self, endpoint_id: str) -> Endpoint | None:
        """The endpoint (None: deleted or never existed)."""
        if endpoint_id in self._known:
            return self._known[endpoint_id]
        waiting = self._fetching.get(endpoint_id)
        if waiting is not None:
            await waiting.wait()
            return self._known.get(endpoint_id)
        event = self._fetching[endpoint_id] = anyio.Event()
        try:
            stored = await ENDPOINT_SLOTS.read(self.aq, endpoint_id)
            self._known[endpoint_id] = stored.record if stored is not None else None
        finally:
            del self._fetching[endpoint_id]
            event.set()
        return self._known.get(endpoint_id)

    def put(self, endpoint: Endpoint) -> None:
        """A newer record this worker wrote itself."""
        known = self._known.get(endpoint.id)
        if known is None or known.gen <= endpoint.gen:
            self._known[endpoint.id] = endpoint

    async def refresh(self) -> None:
        """Read every known endpoint again (one lookup per 500)."""
        names = list(self._known)
        if not names:
            return
        found = await ENDPOINT_SLOTS.read_many(self.aq, names)
        for name in names:
            stored = found.get(name)
            self._known[name] = stored.record if stored is not None else None

    async def refresh_forever(self) -> None:
        """:meth:`refresh` every ``ttl`` seconds."""
        outage = Outage(log, "webhooks: endpoint refresh")
        while True:
            await anyio.sleep(self.ttl)
            began = time.monotonic()
            try:
                await self.refresh()
            except Unavailable as exc:
                outage.lost(exc)  # once per outage, not every ttl
                continue
            except QueratorError as exc:
                log.warning("webhooks: could not refresh endpoints: %s", exc)
            else:
                outage.back()
            log.debug("webhooks: endpoints refreshed in %.3fs", time.monotonic() - began)
