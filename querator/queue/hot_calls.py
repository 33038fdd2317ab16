"""The sync client's hot calls on the calling thread: produce, lease, complete,
retry and renew.

The sync :class:`~querator.queue.client.QueueClient` runs every call of
:class:`~querator.queue.service.AsyncQueueClient` on its event loop thread,
which costs a thread hop and a pool checkout per call. Where the backend has
hot calls for sync callers (:class:`~.backends.base.SyncHotCalls`; PostgreSQL),
:class:`HotPath` runs the common cases of these on the calling thread
instead, with the same checks, the same plans (:mod:`.plans`), the same
routing and the same statements and row decoding as the async calls; the
backend's sync shell holds a session per thread. Every other case returns
None (or False) and the client takes the event loop path, which is the one
implementation of everything: a queue whose settings are not cached yet, a
lease that must wait, items with dedup keys, a complete that spans tables or
fails a check, a store in trouble, telemetry turned on. Background duties
(the listener, maintenance, wakeups of waiting leases) stay on the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from querator.clock import Clock
from querator.errors import RequestTimeout
from querator.queue.backends.base import Backend, SyncHotCalls, TableRefs
from querator.queue.models import Item, Leased, QueueInfo
from querator.queue.plans import RefLike, one_table_refs, route_items
from querator.queue.routing import Spreader, lease_order
from querator.queue.validation import (
    MAX_BATCH,
    check_count,
    check_duration,
    check_instant,
    check_kinds,
    check_name,
    check_reason,
    check_sequence,
)
from querator.queue.waiting import WakeBoard
from querator.telemetry.switches import observing


class HotPath:
    """The hot calls of one client for its sync shell (see the module).

    ``backend`` is the client's, ``cached`` its settings cache's look-up of a
    fresh entry (None on a miss), ``board`` its wakeups, woken on ``loop``.
    """

    def __init__(
        self,
        backend: Backend,
        cached: Callable[[str], QueueInfo | None],
        spreader: Spreader,
        board: WakeBoard,
        clock: Clock,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._backend = backend
        self._cached = cached
        self._spreader = spreader
        self._board = board
        self._clock = clock
        self._loop = loop

    def _calls(self) -> SyncHotCalls | None:
        if observing():  # the telemetry of calls lives on the loop path
            return None
        calls = self._backend.sync_calls()
        return calls if calls is not None and calls.usable() else None

    def produce(self, queue: str, items: Sequence[Item]) -> list[str] | None:
        """:meth:`AsyncQueueClient.produce` of items without dedup keys, or None."""
        calls = self._calls()
        info = self._cached(queue) if calls is not None else None
        if calls is None or info is None:
            return None
        check_sequence("items", items, "querator.Item")
        if not items or any(item.dedup_key is not None for item in items):
            return None
        routed = route_items(info, items, self._spreader)
        ids = calls.insert_unkeyed(info, routed, self._clock.store_now())
        self._wake(queue)
        return ids

    def lease(
        self,
        queue: str,
        client_id: str,
        batch_size: int,
        timeout: float,
        kinds: Iterable[str] | None,
        complete: Sequence[RefLike],
    ) -> tuple[list[Leased] | None, Sequence[RefLike]]:
        """:meth:`AsyncQueueClient.lease`'s first look, and what of ``complete``
        is still to do (all of it, or nothing once done here). The items are
        None when nothing was found while it may wait (``timeout`` > 0), or
        when the loop path is needed. ``complete`` of one partition goes with
        the first partition's lease statement (one round trip)."""
        calls = self._calls()
        if calls is None:
            return None, complete
        check_name("queue", queue)
        check_name("client_id", client_id)
        check_count("batch_size", batch_size, 1, MAX_BATCH)
        check_duration("timeout", timeout, allow_zero=True)
        wanted = check_kinds(kinds)
        info = self._cached(queue)
        if info is None or info.paused:  # the loop path waits while it is paused
            return None, complete
        done = one_table_refs(info, complete) if complete else None
        if complete and done is None:
            return None, complete
        items: list[Leased] = []
        for partition in lease_order(info.settings.partitions):
            got = calls.lease(info, partition, client_id, batch_size - len(items), wanted, done)
            if got is None:  # a check of the complete failed: the loop path names it
                return None, complete
            done = None
            items = items + got.items if items else got.items  # one partition's as it came
            if len(items) >= batch_size:
                break
        if items:
            return items, ()
        if timeout > 0:
            return None, ()
        raise RequestTimeout(f"no item became available in {queue!r} within {timeout}s")

    def complete(self, queue: str, items: Sequence[RefLike]) -> bool:
        """:meth:`AsyncQueueClient.complete` of :class:`Leased` items of one
        partition (:func:`.plans.one_table_refs`); False when not done (the loop
        path then runs it, and names what is wrong)."""
        found = self._one_table(queue, items)
        if found is None:
            return False
        calls, _, refs = found
        return calls.complete(refs, self._clock.store_now())

    def retry(
        self,
        queue: str,
        items: Sequence[RefLike],
        retry_at: datetime | None,
        dead: bool,
        reason: str | None,
    ) -> bool:
        """:meth:`AsyncQueueClient.retry` of :class:`Leased` items of one
        partition of a queue without an attempts limit, now or to ``retry_at``
        (a deferral), none ``dead``; False when not done (the loop path then
        runs it, and names what is wrong)."""
        calls = self._calls()
        if calls is None:
            return False
        check_reason(reason)  # kept only with dead-lettered items: none here
        check_name("queue", queue)
        info = self._cached(queue)
        if dead or info is None or info.settings.max_attempts != 0:
            return False
        refs = one_table_refs(info, items)
        if refs is None:
            return False
        check_instant("retry_at", retry_at)  # after the items, as the loop path checks
        if not calls.retry(refs, retry_at, self._clock.store_now()):
            return False
        self._wake(queue)
        return True

    def renew(
        self, queue: str, items: Sequence[RefLike], extend: float | None
    ) -> list[Leased] | None:
        """:meth:`AsyncQueueClient.renew` of :class:`Leased` items of one
        partition; None when not done (the loop path then runs it, and names
        what is wrong)."""
        found = self._one_table(queue, items)
        if found is None:
            return None
        calls, info, refs = found
        if extend is not None:  # after the items, as the loop path checks
            check_duration("extend", extend)
        seconds = extend or info.settings.lease_timeout
        return calls.renew(info, refs, seconds, self._clock.store_now())

    def _one_table(
        self, queue: str, items: Sequence[RefLike]
    ) -> tuple[SyncHotCalls, QueueInfo, TableRefs] | None:
        """The hot calls, ``queue``'s cached settings and ``items`` as the refs
        of one partition table (:func:`.plans.one_table_refs`), or None when
        the loop path must run the call."""
        calls = self._calls()
        if calls is None:
            return None
        check_name("queue", queue)
        info = self._cached(queue)
        if info is None:
            return None
        refs = one_table_refs(info, items)
        return None if refs is None else (calls, info, refs)

    def _wake(self, queue: str) -> None:
        """Wake this client's waiting leases of ``queue``, if any, on the loop."""
        if self._board.waiting(queue):
            self._loop.call_soon_threadsafe(self._board.wake, queue)
