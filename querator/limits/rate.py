"""Rate limits enforced in the store: at most ``n`` starts per ``per`` seconds
and key, across every process and machine that uses the store."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from querator.errors import InvalidArgument, QueueNotFound, RequestTimeout, UsageError
from querator.limits.rules import (
    check_key,
    check_n,
    check_per,
    check_rate_name,
    limits_of,
    queue_of,
    settings_for,
    slot_keys,
    slots,
)
from querator.locks.semaphore import default_client_id
from querator.locks.store import check_owner
from querator.model_bases import View
from querator.queue.client import SyncShell
from querator.queue.models import Leased
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import check_duration

DEFAULT_KEY = "-"
"""The key of starts that name none."""
WAIT_CHUNK = 300.0
"""Seconds one wait of an ``acquire`` without a timeout lasts before it looks again."""


class RateLimit:
    """At most ``n`` starts per ``per`` seconds for each key, enforced in the
    store (see :class:`AsyncRateLimiter`). ``key`` (optional) computes a start's
    key from the arguments of what it limits (the workflow layer's use)."""

    __slots__ = ("key", "n", "name", "per")

    def __init__(
        self, name: str, n: int, *, per: float = 1.0, key: Callable[..., str] | None = None
    ) -> None:
        self.name = check_rate_name(name)
        """The limit's name: every client that names it shares it."""
        self.n = check_n(n)
        """Starts admitted per period and key."""
        self.per = check_per(per)
        """The period, in seconds."""
        if key is not None and not callable(key):
            raise InvalidArgument("key", "must be a function of the limited call's arguments")
        self.key = key
        """The function giving a start's key (None: one key for every start)."""

    def __repr__(self) -> str:
        return f"RateLimit({self.name!r}, {self.n}, per={self.per})"


class RateDecision(View):
    """The answer of a try: may the caller start now, and if not, when."""

    allowed: bool
    """True: the start is counted; go."""
    retry_after: float
    """Seconds until a start of this key may be admitted (0 when ``allowed``)."""
    at: datetime | None = None
    """When the start was admitted, by the store's clock (None when not allowed)."""


@runtime_checkable
class ServesRates(Protocol):
    """A client that counts starts through a server (``querator.http.AsyncQuerator``)."""

    async def create_rate(self, name: str, n: int, *, per: float = 1.0) -> None: ...

    async def try_acquire_rate(
        self,
        name: str,
        n: int,
        *,
        per: float = 1.0,
        key: str = DEFAULT_KEY,
        client_id: str | None = None,
    ) -> RateDecision: ...

    async def acquire_rate(
        self,
        name: str,
        n: int,
        *,
        per: float = 1.0,
        key: str = DEFAULT_KEY,
        timeout: float | None = None,
        client_id: str | None = None,
    ) -> datetime: ...


class AsyncRateLimiter:
    """``limit`` on the store of ``aq``. Each key has ``n`` slots; a start
    takes one for ``per`` seconds (a lease that is never given back), so no
    window of ``per`` seconds holds more than ``n`` starts of a key, by the
    database's clock. A key's slots are spread evenly over the period on its
    first use: starts are smooth, never a burst of ``n`` at once.

    ``aq`` may be an HTTP client (:class:`querator.http.AsyncQuerator`): the
    server's limiter counts each start (``/v1/limits.create`` and
    ``/v1/limits.acquire``; the limit travels with each call)."""

    def __init__(
        self,
        aq: AsyncQueueClient | ServesRates,
        limit: RateLimit,
        *,
        client_id: str | None = None,
    ) -> None:
        if not isinstance(limit, RateLimit):
            raise InvalidArgument("limit", f"must be a RateLimit, got {type(limit).__name__}")
        if not isinstance(aq, AsyncQueueClient | ServesRates):
            raise InvalidArgument(
                "q",
                "must be a querator.AsyncQuerator or a querator.http.AsyncQuerator"
                f" (a Querator or a querator.http.Querator in sync code), got {type(aq).__name__}",
            )
        self.limit = limit
        """What it enforces."""
        self.client_id = check_owner(default_client_id() if client_id is None else client_id)
        """Who starts, as the slots' leases record."""
        self._server = aq if isinstance(aq, ServesRates) else None
        self._aq = aq if isinstance(aq, AsyncQueueClient) else None
        self._queue = queue_of(limit.name)
        self._made: set[str] = set()

    @property
    def _store(self) -> AsyncQueueClient:
        """The library client whose store counts the starts."""
        if self._aq is None:
            raise UsageError("this rate limiter counts its starts through a server")
        return self._aq

    async def create(self) -> None:
        """Create the limit in the store (idempotent). A limit that exists with
        another ``n`` or ``per`` is :class:`~querator.errors.InvalidArgument`."""
        if self._server is not None:
            limit = self.limit
            await self._server.create_rate(limit.name, limit.n, per=limit.per)
            return
        settings = settings_for(self.limit.n, self.limit.per)
        info = await self._store.create_queue(self._queue, settings, exist_ok=True)
        stored = limits_of(info.settings.reference)
        if stored != (self.limit.n, self.limit.per):
            raise InvalidArgument(
                "n", f"rate limit {self.limit.name!r} exists with (n, per) = {stored}"
            )

    async def try_acquire(self, key: str = DEFAULT_KEY) -> RateDecision:
        """Count a start of ``key`` if one is admitted now; otherwise say how many
        seconds until one is (nothing is counted then)."""
        if self._server is not None:
            limit, who = self.limit, self.client_id
            return await self._server.try_acquire_rate(
                limit.name, limit.n, per=limit.per, key=key, client_id=who
            )
        key = await self._ready(key)
        try:
            [slot] = await self._store.lease(self._queue, client_id=self.client_id, kinds=[key])
        except RequestTimeout:
            return RateDecision(allowed=False, retry_after=await self._retry_after(key))
        return RateDecision(allowed=True, retry_after=0.0, at=self._admitted(slot))

    async def acquire(self, key: str = DEFAULT_KEY, timeout: float | None = None) -> datetime:
        """Wait until a start of ``key`` is admitted, count it, and return when it
        was admitted (the store's clock). Raises
        :class:`~querator.errors.RequestTimeout` after ``timeout`` seconds (None:
        no limit) without one."""
        left = None if timeout is None else check_duration("timeout", timeout, allow_zero=True)
        if self._server is not None:
            limit, who = self.limit, self.client_id
            return await self._server.acquire_rate(
                limit.name, limit.n, per=limit.per, key=key, timeout=left, client_id=who
            )
        key = await self._ready(key)
        while True:
            wait = WAIT_CHUNK if left is None else left
            try:
                [slot] = await self._store.lease(
                    self._queue, client_id=self.client_id, kinds=[key], timeout=wait
                )
            except RequestTimeout:
                if left is not None:
                    raise RequestTimeout(
                        f"rate limit {self.limit.name!r} admitted no start of {key!r}"
                        f" within {timeout}s"
                    ) from None
                continue
            return self._admitted(slot)

    async def _ready(self, key: object) -> str:
        """``key`` checked, with the limit and the key's slots made (once per client)."""
        key = check_key(key)
        if key in self._made:
            return key
        if not self._made:
            await self.create()
        now = self._store.clock.now()
        try:
            await self._store.produce(self._queue, slots(key, self.limit.n, self.limit.per, now))
        except QueueNotFound:
            await self.create()
            await self._store.produce(self._queue, slots(key, self.limit.n, self.limit.per, now))
        self._made.add(key)
        return key

    def _admitted(self, slot: Leased) -> datetime:
        """The instant a slot was leased: its lease lasts exactly ``per``."""
        return slot.lease_deadline - timedelta(seconds=self.limit.per)

    async def _retry_after(self, key: str) -> float:
        found = await self._store.lookup(self._queue, slot_keys(key, self.limit.n))
        if not found:
            return 0.0
        now = self._store.clock.now()
        due = min(item.available_at for item in found.values())
        return max(0.0, (due - now).total_seconds())


class RateLimiter:
    """:class:`AsyncRateLimiter` for ordinary code, on :class:`~querator.Querator`
    or :class:`querator.http.Querator`."""

    def __init__(
        self, q: SyncShell[Any], limit: RateLimit, *, client_id: str | None = None
    ) -> None:
        self._async = AsyncRateLimiter(q.aio, limit, client_id=client_id)
        self._q = q
        self._call("RateLimiter()", self._async.create)

    @property
    def limit(self) -> RateLimit:
        """What it enforces."""
        return self._async.limit

    def try_acquire(self, key: str = DEFAULT_KEY) -> RateDecision:
        """See :meth:`AsyncRateLimiter.try_acquire`."""
        decision: RateDecision = self._call("try_acquire()", self._async.try_acquire, key)
        return decision

    def acquire(self, key: str = DEFAULT_KEY, timeout: float | None = None) -> datetime:
        """See :meth:`AsyncRateLimiter.acquire`."""
        admitted: datetime = self._call("acquire()", self._async.acquire, key, timeout)
        return admitted

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._q.call(fn, *args)
        raise UsageError(
            f"RateLimiter.{what} called inside a running event loop; use AsyncRateLimiter"
        )
