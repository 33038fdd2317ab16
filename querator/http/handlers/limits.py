"""Handler of ``/v1/limits.acquire``: the library's
:class:`~querator.limits.AsyncRateLimiter` on the server's store.

The server keeps the limiters it made (at most :data:`KEPT` per store client,
the least recently used dropped first), so a call of a limit and key it has
seen costs one lease, not a queue check and a produce of the key's slots too.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from querator.http.wire.limits import CreateRateRequest, RateReply, RateRequest
from querator.http.wire.queue import Reply
from querator.limits.rate import AsyncRateLimiter, RateDecision, RateLimit
from querator.queue.per_client import per_client
from querator.queue.service import AsyncQueueClient

KEPT = 1_024
"""Limiters kept per store client (one per name, n, per and client id)."""

_Key = tuple[str, int, float, str | None]
_Limit = CreateRateRequest | RateRequest


def _limiter(aq: AsyncQueueClient, body: _Limit) -> AsyncRateLimiter:
    """The kept limiter of ``body``'s limit, else a new one (checked, kept)."""
    kept: OrderedDict[_Key, AsyncRateLimiter] = per_client(aq, "rate-limiters", OrderedDict)
    client_id = body.client_id if isinstance(body, RateRequest) else None
    key = (body.name, body.n, body.per, client_id)
    limiter = kept.get(key)
    if limiter is not None:
        kept.move_to_end(key)
        return limiter
    limit = RateLimit(body.name, body.n, per=body.per)
    limiter = AsyncRateLimiter(aq, limit, client_id=client_id)
    while len(kept) >= KEPT:
        kept.popitem(last=False)
    kept[key] = limiter
    return limiter


async def create(state: Any, body: CreateRateRequest) -> Reply:
    """Create a rate limit in the store (idempotent; 400 when it exists with
    another ``n`` or ``per``)."""
    await _limiter(state.aq, body).create()
    return Reply()


async def acquire(state: Any, body: RateRequest) -> RateReply:
    """A try (``request_timeout`` 0) or a wait of up to ``request_timeout`` for
    a start of ``key`` (454 when none was admitted in time)."""
    limiter = _limiter(state.aq, body)
    if not body.request_timeout:
        return RateReply.of(await limiter.try_acquire(body.key))
    at = await state.unless_stopping(lambda: limiter.acquire(body.key, body.request_timeout))
    return RateReply.of(RateDecision(allowed=True, retry_after=0.0, at=at))
