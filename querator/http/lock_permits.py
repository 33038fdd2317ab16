"""The permits of :mod:`querator.locks` held through a querator server: what
``Lock(q, name)`` and ``Semaphore(q, name, limit)`` use when ``q`` is an HTTP
client (its :meth:`~querator.http.AsyncQuerator.permit_source`). Each call
is one of ``/v1/locks.*``; the client's background task renews the permits
(the server keeps none for them)."""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

import anyio

from querator.errors import LockLost, RequestTimeout
from querator.http.wire.locks import PermitReply
from querator.http.wire.types import LONG_POLL_MAX, LONG_POLL_MIN
from querator.locks.names import DEFAULT_LEASE
from querator.locks.permit import Permit, Taken
from querator.locks.sources import RenewalSink
from querator.locks.store import timed_out
from querator.queue.validation import check_duration


class LockClient(Protocol):
    """What the permits need of the HTTP client: its lock calls and a task group."""

    async def create_lock(self, name: str, limit: int = 1, *, lease: float = ...) -> None: ...

    async def acquire_lock(
        self,
        name: str,
        client_id: str,
        *,
        limit: int | None = None,
        lease: float = ...,
        timeout: float = 0.0,
    ) -> PermitReply: ...

    async def renew_lock(self, permit: PermitReply) -> PermitReply: ...

    async def release_lock(self, permit: PermitReply) -> None: ...

    def run_in_background(self, service: Callable[[], Coroutine[Any, Any, None]]) -> None: ...


class ServedPermits:
    """Permits held through the server of ``client`` (a
    :class:`~querator.locks.sources.PermitSource`)."""

    def __init__(self, client: LockClient) -> None:
        self._client = client

    async def create(self, name: str, limit: int, lease: float) -> None:
        """See :meth:`~querator.locks.sources.PermitSource.create`."""
        await self._client.create_lock(name, limit, lease=lease)

    async def take(self, name: str, client_id: str, timeout: float | None) -> Taken:
        """See :meth:`~querator.locks.sources.PermitSource.take`: long polls of
        at most 15 minutes each until a permit is free or ``timeout`` passes."""
        left = None if timeout is None else check_duration("timeout", timeout, allow_zero=True)
        deadline = None if left is None else anyio.current_time() + left
        while True:
            rest = LONG_POLL_MAX if deadline is None else deadline - anyio.current_time()
            wait = min(max(rest, 0.0), LONG_POLL_MAX)
            if 0 < wait <= LONG_POLL_MIN:
                wait = LONG_POLL_MIN + 0.001  # the server's shortest wait
            try:
                reply = await self._client.acquire_lock(name, client_id, timeout=wait)
            except RequestTimeout:
                if deadline is not None and anyio.current_time() + LONG_POLL_MIN >= deadline:
                    raise timed_out(name, timeout) from None
                continue
            lease = DEFAULT_LEASE if reply.lease is None else reply.lease
            return Taken(reply, reply.permit, reply.token, lease, client_id, datetime.now(UTC))

    async def renew(self, batch: Sequence[Permit], sink: RenewalSink) -> None:
        """See :meth:`~querator.locks.sources.PermitSource.renew`: one
        ``locks.renew`` call per permit."""
        for permit in batch:
            started = time.monotonic()
            try:
                renewed = await self._client.renew_lock(permit._current)
            except LockLost:
                sink.lost(permit)
                continue
            sink.renewed(permit, renewed, started)

    async def release(self, permit: Permit) -> None:
        """See :meth:`~querator.locks.sources.PermitSource.release`."""
        await self._client.release_lock(permit._current)

    def run_in_background(self, service: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """See :meth:`~querator.locks.sources.PermitSource.run_in_background`."""
        self._client.run_in_background(service)
