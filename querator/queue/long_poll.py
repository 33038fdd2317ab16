"""The long-poll lease: lease, or wait for a wakeup (or a due instant) and look again.

Waiters of one client share their looks (see :class:`LongPoll`): a thousand
consumers waiting on one empty queue cost one look per wakeup or wait cap, not
a thousand. Wakeups come through the client's :class:`~.waiting.WakeBoard`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import NamedTuple

import anyio

from querator.clock import Clock
from querator.errors import RequestTimeout
from querator.queue.backends.base import Backend, Kinds, Leases
from querator.queue.models import QueueInfo
from querator.queue.routing import lease_order
from querator.queue.waiting import WakeBoard, wait_for_wake

NOTIFIED_WAIT_CAP = 60.0
"""Longest single wait when cross-process wakeups are on (a safety net)."""

NOTHING = Leases([], [])
"""A look that leased nothing (never appended to)."""


LookKey = tuple[str, Kinds]
"""What waiting leases share looks by: a queue and a lease's kind filter."""


class EmptyLook(NamedTuple):
    """What a waiting lease saw when it found nothing leasable."""

    ticket: anyio.Event
    """The wakeup ticket it looked under."""
    next_at: datetime | None
    """The earliest ``available_at`` then (an item due, a lease expiring)."""
    at: float
    """When it looked (``anyio.current_time()``)."""
    info: QueueInfo
    """The queue's settings it looked with."""


class LongPoll:
    """The waiting leases of one client: what they saw, so that they share looks.

    ``wait_cap`` is the longest single wait (a safety net with cross-process
    wakeups, the poll interval without); ``notified`` says whether wakeups come
    from other processes too; ``listen`` starts the client's wakeup listener
    (called before the first wait).
    """

    def __init__(
        self,
        board: WakeBoard,
        clock: Clock,
        *,
        wait_cap: float,
        notified: bool,
        listen: Callable[[], None],
    ) -> None:
        self._board = board
        self._clock = clock
        self.wait_cap = wait_cap
        """The longest single wait of a waiting lease or watch."""
        self._notified = notified
        self._listen = listen
        self._drained: dict[LookKey, anyio.Event] = {}
        """(Queue, kinds) -> the wakeup ticket under which a lease of it came back short."""
        self._empty: dict[LookKey, EmptyLook] = {}
        """(Queue, kinds) -> the last look of a waiting lease that found nothing leasable."""
        self._looking: dict[LookKey, tuple[anyio.Event, anyio.Event]] = {}
        """(Queue, kinds) -> (ticket, done) of the waiting lease looking at it now."""

    async def lease(
        self,
        backend: Backend,
        queue_info: Callable[[str], Awaitable[QueueInfo]],
        queue: str,
        client_id: str,
        batch_size: int,
        timeout: float,
        wanted: Kinds,
    ) -> tuple[Leases, int]:
        """Lease up to ``batch_size`` items of ``queue``, waiting up to ``timeout``
        seconds for one (arguments checked by the caller); returns them with the
        instant (``time.time_ns()``) of the look that found them. Raises
        :class:`RequestTimeout` when none came."""
        look = (queue, wanted)
        deadline = anyio.current_time() + timeout
        backoff = 0.005
        if timeout > 0:
            # A client that waits listens even while it finds items: it hears a
            # pause of the queue at once instead of within its cache_ttl.
            self._listen()
        while True:
            started = time.time_ns()
            ticket = self._board.ticket(queue)
            known = self._empty_look(look, ticket) if timeout > 0 else None
            # a shared look that still holds needs no settings look-up either
            info = known.info if known is not None else await queue_info(queue)
            leased, known = await self._look(
                backend, info, (ticket, known), client_id, batch_size, timeout, wanted
            )
            if leased.items:
                if len(leased.items) < batch_size:
                    self._drained[look] = ticket
                else:
                    self._drained.pop(look, None)
                return leased, started
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                raise RequestTimeout(f"no item became available in {queue!r} within {timeout}s")
            wait = min(remaining, self.wait_cap)
            next_at = await _next_at(backend, info, known, wanted)
            if next_at is not None:
                due_in = (next_at - self._clock.now()).total_seconds()
                # Due already yet not leased (locked by a concurrent lease, or a
                # clock skew): back off instead of spinning.
                wait = min(wait, backoff if due_in <= 0 else due_in + 0.001)
                backoff = min(backoff * 2, 0.5) if due_in <= 0 else 0.005
                if due_in <= 0:
                    self._drained.pop(look, None)
            self._listen()
            woken = await wait_for_wake(ticket, wait)
            if not woken:
                self._drained.pop(look, None)  # a timer: look again
            if not woken and wait >= remaining and self._notified:
                raise RequestTimeout(f"no item became available in {queue!r} within {timeout}s")

    async def _look(
        self,
        backend: Backend,
        info: QueueInfo,
        under: tuple[anyio.Event, EmptyLook | None],
        client_id: str,
        batch_size: int,
        timeout: float,
        wanted: Kinds,
    ) -> tuple[Leases, EmptyLook | None]:
        """One look of :meth:`lease` under ``under`` (its ticket, and the empty
        look that still holds under it, if any): what it leased, and the empty
        look that holds after it."""
        ticket, known = under
        look = (info.name, wanted)
        if info.paused:
            # A paused queue's items wait, as if it were empty, until a resume
            # wakes this client (its cached info is dropped then).
            return NOTHING, known
        if timeout > 0 and (self._drained.get(look) is ticket or known is not None):
            # A lease under this very ticket came back short, or another waiter
            # found the queue empty under it moments ago, and nothing was
            # produced or retried since: go straight to waiting (the timer
            # below still covers items that come due or whose lease expires).
            return NOTHING, known
        if timeout > 0:
            leased = await self._look_shared(backend, info, ticket, client_id, batch_size, wanted)
            return leased, self._empty_look(look, ticket)
        return await lease_once(backend, info, client_id, batch_size, wanted), known

    async def _look_shared(
        self,
        backend: Backend,
        info: QueueInfo,
        ticket: anyio.Event,
        client_id: str,
        size: int,
        kinds: Kinds,
    ) -> Leases:
        """A waiting lease's look: lease, and when nothing came, note the earliest
        ``available_at`` as the queue's :class:`EmptyLook`. While one waiter looks
        under a ticket the others wait for it and use its look: a thousand
        waiters of one queue (and kind filter) cost one look per wakeup or wait
        cap, not a thousand."""
        look = (info.name, kinds)
        looking = self._looking.get(look)
        if looking is not None and looking[0] is ticket:
            await looking[1].wait()
            if self._empty_look(look, ticket) is not None:
                return NOTHING
        done = anyio.Event()
        self._looking[look] = (ticket, done)
        try:
            leased = await lease_once(backend, info, client_id, size, kinds)
            if not leased.items:
                next_at = await backend.next_available_at(info, kinds)
                self._empty[look] = EmptyLook(ticket, next_at, anyio.current_time(), info)
            return leased
        finally:
            if self._looking.get(look) == (ticket, done):
                del self._looking[look]
            done.set()

    def _empty_look(self, queue: LookKey, ticket: anyio.Event) -> EmptyLook | None:
        """The last look that found ``queue`` empty, if it still holds: taken under
        this ticket (no wakeup since), within the wait cap, before its next due
        instant. Waiters of one queue then share one look per wait cap."""
        look = self._empty.get(queue)
        if look is None or look.ticket is not ticket:
            return None
        if anyio.current_time() - look.at >= self.wait_cap:
            return None
        if look.next_at is not None and look.next_at <= self._clock.now():
            return None
        return look


async def _next_at(
    backend: Backend, info: QueueInfo, known: EmptyLook | None, kinds: Kinds
) -> datetime | None:
    """When something may become leasable after a look that found nothing (None:
    nothing known; a paused queue waits for its resume)."""
    if info.paused:
        return None
    if known is not None:
        return known.next_at
    return await backend.next_available_at(info, kinds)


async def lease_once(
    backend: Backend, info: QueueInfo, client_id: str, batch_size: int, kinds: Kinds = None
) -> Leases:
    """One look: lease up to ``batch_size`` items, partition after partition in
    lease order, until the batch is full."""
    leased = NOTHING  # replaced, never appended to (a batch of one partition stays as it came)
    for partition in lease_order(info.settings.partitions):
        got = await backend.lease(info, partition, client_id, batch_size - len(leased.items), kinds)
        if not leased.items:
            leased = got
        elif got.items:
            leased = Leases(leased.items + got.items, leased.waited + got.waited)
        if len(leased.items) >= batch_size:
            break
    return leased
