"""The HTTP clients' rate-limit methods: ``/v1/limits.acquire`` from Python.

The library counts a start with ``RateLimiter(q, RateLimit(name, n, per=...))``
(:mod:`querator.limits`), which needs the store's clock; over HTTP the server's
limiter does it, so the limit travels with each call. Same checks, answers and
errors: :class:`AsyncRateCalls` is mixed into
:class:`querator.http.AsyncQuerator`, :class:`RateCalls` into
:class:`querator.http.Querator`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import anyio

from querator.errors import RequestTimeout
from querator.http.callers import LoopOwner, Poster
from querator.http.durations import format_duration
from querator.http.wire import queue as wq
from querator.http.wire.limits import RateReply
from querator.http.wire.types import LONG_POLL_MAX, LONG_POLL_MIN
from querator.limits.rate import DEFAULT_KEY, RateDecision, RateLimit
from querator.limits.rules import check_key
from querator.locks.store import check_owner
from querator.queue.validation import check_duration


def _body(limit: RateLimit, key: str, client_id: str | None, wait: float) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": limit.name,
        "n": limit.n,
        "per": format_duration(limit.per),
        "key": check_key(key),
        "request_timeout": format_duration(wait),
    }
    if client_id is not None:
        body["client_id"] = check_owner(client_id)
    return body


class AsyncRateCalls:
    """Rate limits over HTTP (see :class:`querator.limits.AsyncRateLimiter`)."""

    async def create_rate(self: Poster, name: str, n: int, *, per: float = 1.0) -> None:
        """See :meth:`querator.limits.AsyncRateLimiter.create`, for
        ``RateLimit(name, n, per=per)``: create the limit (idempotent);
        :class:`~querator.errors.InvalidArgument` when it exists with another
        ``n`` or ``per``."""
        limit = RateLimit(name, n, per=per)
        body = {"name": limit.name, "n": limit.n, "per": format_duration(limit.per)}
        await self._post("/v1/limits.create", body, wq.Reply)

    async def try_acquire_rate(
        self: Poster,
        name: str,
        n: int,
        *,
        per: float = 1.0,
        key: str = DEFAULT_KEY,
        client_id: str | None = None,
    ) -> RateDecision:
        """See :meth:`querator.limits.AsyncRateLimiter.try_acquire`, for
        ``RateLimit(name, n, per=per)``: count a start of ``key`` if one is
        admitted now, else say in how many seconds one is."""
        body = _body(RateLimit(name, n, per=per), key, client_id, 0.0)
        return (await self._post("/v1/limits.acquire", body, RateReply)).decision()

    async def acquire_rate(
        self: Poster,
        name: str,
        n: int,
        *,
        per: float = 1.0,
        key: str = DEFAULT_KEY,
        timeout: float | None = None,
        client_id: str | None = None,
    ) -> datetime:
        """See :meth:`querator.limits.AsyncRateLimiter.acquire`: wait until a
        start of ``key`` is admitted (long polls of at most 15 minutes each),
        count it and return when it was admitted. RequestTimeout after
        ``timeout`` seconds (None: no limit) without one."""
        limit = RateLimit(name, n, per=per)
        left = None if timeout is None else check_duration("timeout", timeout, allow_zero=True)
        deadline = None if left is None else anyio.current_time() + left
        while True:
            rest = LONG_POLL_MAX if deadline is None else deadline - anyio.current_time()
            wait = min(max(rest, LONG_POLL_MIN + 0.001), LONG_POLL_MAX)
            body = _body(limit, key, client_id, wait)
            try:
                reply = await self._post("/v1/limits.acquire", body, RateReply, wait)
            except RequestTimeout:
                if deadline is not None and anyio.current_time() + LONG_POLL_MIN >= deadline:
                    raise
                continue
            if reply.allowed and reply.at is not None:  # a wait answers only that
                return reply.at


class RateCalls:
    """The sync twins of :class:`AsyncRateCalls`, run on the client's loop."""

    def create_rate(self: LoopOwner, name: str, n: int, *, per: float = 1.0) -> None:
        """See :meth:`AsyncRateCalls.create_rate`."""
        self.call(self.aio.create_rate, name, n, per=per)

    def try_acquire_rate(
        self: LoopOwner,
        name: str,
        n: int,
        *,
        per: float = 1.0,
        key: str = DEFAULT_KEY,
        client_id: str | None = None,
    ) -> RateDecision:
        """See :meth:`AsyncRateCalls.try_acquire_rate`."""
        decision: RateDecision = self.call(
            self.aio.try_acquire_rate, name, n, per=per, key=key, client_id=client_id
        )
        return decision

    def acquire_rate(
        self: LoopOwner,
        name: str,
        n: int,
        *,
        per: float = 1.0,
        key: str = DEFAULT_KEY,
        timeout: float | None = None,
        client_id: str | None = None,
    ) -> datetime:
        """See :meth:`AsyncRateCalls.acquire_rate`."""
        at: datetime = self.call(
            self.aio.acquire_rate, name, n, per=per, key=key, timeout=timeout, client_id=client_id
        )
        return at
