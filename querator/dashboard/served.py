"""What the dashboard's pages need of the server's state: a module of its own,
so the pages and the app that routes to them do not import each other."""

from __future__ import annotations

from typing import Protocol

import anyio

from querator.dashboard.throughput import Sampler
from querator.http.auth import TokenCheck
from querator.queue.service import AsyncQueueClient

__all__ = ["Served"]


class Served(Protocol):
    """What the dashboard needs of the server's state (``ServerState``)."""

    aq: AsyncQueueClient
    tokens: TokenCheck
    throughput: Sampler | None
    """The queues' throughput sampler (None: no sparklines)."""

    @property
    def waits(self) -> set[anyio.CancelScope]:
        """The open waits to cancel when the server stops."""
        ...

    @property
    def stopping(self) -> bool:
        """True once the server has begun to shut down."""
        ...
