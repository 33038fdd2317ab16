"""What one client may hold of ``querator serve``: a deadline to send each
request, and a cap on the connections of one address.

uvicorn has neither: its keep-alive timeout runs only between requests (a
byte received cancels it), so a client that sends a request's headers or body
slowly — or connects and sends nothing — holds its connection, and the
server's file descriptor, for as long as it likes (slowloris); and its
``limit_concurrency`` counts every client together. ASGI middleware cannot
help: the app is called only once the headers are in. So the server runs
uvicorn's own httptools protocol with three hooks (:class:`GuardedProtocol`):

- from the connection (or the first byte of a request on a kept-alive one)
  to the end of the headers: ``header_timeout``, then 408 and close;
- from the end of the headers to the end of the body: ``body_timeout``, then
  close. A response may take as long as it needs (long polls): the deadlines
  stop when the request is in;
- at most ``max_per_client`` open connections per client address: one more
  is answered 503 and closed.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from typing import Any
from weakref import WeakKeyDictionary

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from querator.http.limits import ConnectionLimits

log = logging.getLogger("querator.http")


class ServeConfig(uvicorn.Config):
    """uvicorn's configuration with :class:`GuardedProtocol` and its limits
    (pickled with it to the processes of ``--workers N``)."""

    def __init__(self, app: Any, limits: ConnectionLimits, **options: Any) -> None:
        super().__init__(app, http=GuardedProtocol, **options)
        self.limits = limits


_OPEN: WeakKeyDictionary[ServerState, Counter[str]] = WeakKeyDictionary()
"""Open connections per client address, per server."""
TIMED_OUT = b"HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"


def _too_many(limit: int) -> bytes:
    message = f"too many connections; at most {limit} from one address"
    body = json.dumps(
        {"code": 503, "code_text": "Service Unavailable", "message": message, "details": {}}
    ).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
        f"connection: close\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with request deadlines and a per-address cap."""

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.limits: ConnectionLimits = getattr(config, "limits", ConnectionLimits())
        self._open = _OPEN.setdefault(server_state, Counter())
        self._address: str | None = None
        """The client address counted in ``_open`` (None: not counted)."""
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Refuse the connection past the address's cap; else start the header deadline."""
        super().connection_made(transport)
        address = self.client[0] if self.client else None
        cap = self.limits.max_per_client
        if address is not None and cap:
            if self._open[address] >= cap:
                log.info("querator: refused a connection from %s: %d already open", address, cap)
                transport.write(_too_many(cap))
                transport.close()
                return
            self._open[address] += 1
            self._address = address
        self._arm(self.limits.header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop the deadline and uncount the connection."""
        self._disarm()
        if self._address is not None:
            self._open[self._address] -= 1
            if self._open[self._address] <= 0:
                del self._open[self._address]
            self._address = None
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        """A request's first byte: its headers are due within ``header_timeout``."""
        super().on_message_begin()
        if self._deadline is None:
            self._arm(self.limits.header_timeout)

    def on_headers_complete(self) -> None:
        """The headers are in: the body is due within ``body_timeout``."""
        super().on_headers_complete()
        self._arm(self.limits.body_timeout)

    def on_message_complete(self) -> None:
        """The request is in: no deadline while it is answered."""
        super().on_message_complete()
        self._disarm()

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        log.info("querator: closed a connection from %s: its request was too slow", self.client)
        if self.cycle is None or self.cycle.response_complete:
            self.transport.write(TIMED_OUT)  # the headers never came: no app is running
        self.transport.close()
