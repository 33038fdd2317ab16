"""The sync HTTP client: :class:`querator.Querator`'s queue methods over HTTP.

It is the library's own sync shell (one private event loop thread, every
method forwarding to the async client), given the HTTP async client instead
of the store's: there is one implementation of each call.
"""

from __future__ import annotations

from typing import cast

from querator.http.client import DEFAULT_URL, AsyncQuerator
from querator.http.lock_calls import LockCalls
from querator.queue.client import QueueClient
from querator.queue.service import AsyncQueueClient as StoreClient


class Querator(LockCalls, QueueClient):
    """A client of a querator HTTP server, for ordinary (sync) code.

    ``Querator(url, token=None, timeout=30.0, encoding="json")``: same
    methods, return types and exceptions as :class:`querator.Querator`'s queue
    operations (``encoding="protobuf"``: see :class:`AsyncQuerator`).
    """

    _async_class = cast(type[StoreClient], AsyncQuerator)
    """The HTTP client has the store client's queue methods, with the same
    signatures; the shell only forwards to them (``aio`` is that HTTP client)."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        encoding: str = "json",
    ) -> None:
        super().__init__(url, token=token, timeout=timeout, encoding=encoding)  # type: ignore[call-arg]
