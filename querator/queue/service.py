"""The queue service: validates, routes, waits and wakes; backends store.

:class:`AsyncQueueClient` is the one implementation of every queue operation;
the sync :class:`querator.Querator` is a thin shell that runs it on a
background event loop. It is composed of the parts that do the work: queue
management and the settings cache (:mod:`.admin`), the long-poll lease
(:mod:`.long_poll`), transaction plans (:mod:`.plans`) and the telemetry of its
calls (:mod:`querator.telemetry.queue_calls`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Coroutine, Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self

from typing_extensions import Unpack

from querator.errors import UsageError
from querator.queue.admin import QueueAdmin
from querator.queue.backends import open_backend
from querator.queue.backends.base import Backend, Kinds, ProduceSteps
from querator.queue.backends.schema_versions import SchemaReport
from querator.queue.background import ClientTasks
from querator.queue.hot_calls import HotPath
from querator.queue.item_admin import ItemAdmin
from querator.queue.long_poll import NOTIFIED_WAIT_CAP, LongPoll
from querator.queue.maintenance import run_maintenance
from querator.queue.models import (
    Item,
    Leased,
    QueueGauges,
    QueueInfo,
    QueueSettings,
    QueueStats,
    StoredItem,
    TransactResult,
)
from querator.queue.options import (
    DEFAULT_URL,
    ClientOptions,
    TransactOptions,
    check_options,
    client_settings,
)
from querator.queue.plans import (
    RefLike,
    change_request,
    commit_request,
    one_table_refs,
    route_items,
)
from querator.queue.routing import Spreader, lease_order
from querator.queue.transactions import Transactions
from querator.queue.validation import (
    MAX_BATCH,
    check_count,
    check_duration,
    check_kinds,
    check_name,
    check_reason,
    check_sequence,
)
from querator.queue.waiting import WakeBoard, Watch
from querator.telemetry import queue_gauges
from querator.telemetry.queue_calls import Carrier, QueueCalls
from querator.telemetry.switches import observing

__all__ = ["AsyncQueueClient", "SchemaReport", "migrate_store"]


class AsyncQueueClient:
    """A client of one queue store, for ``async`` code (anyio: asyncio or trio).

    Use it as ``async with AsyncQueueClient(url) as q:`` (or ``await q.open()`` and
    ``await q.close()`` from the same task). ``url`` is ``postgresql://…``,
    ``sqlite:///path.db`` (default ``sqlite:///querator.db``) or ``memory://``.

    ``notifications=False`` turns off cross-process wakeups (PostgreSQL
    LISTEN needs a session connection, which PgBouncer in transaction pooling
    mode does not give); waiting consumers then poll every ``poll_interval``
    seconds. ``maintenance_interval`` is how often this client offers to
    dead-letter exhausted and expired items (one client in the whole fleet does
    it per interval). ``wait_for_store`` (seconds, default 0) is how long
    opening keeps trying, with capped backoff, while the store is unreachable
    (``Unavailable``: a database still starting, or restarting) before it
    raises; a store that refuses the URL for good (a missing database) raises
    ``InvalidArgument`` at once.
    """

    def __init__(self, url: str = DEFAULT_URL, **options: Unpack[ClientOptions]) -> None:
        settings = client_settings(options)
        clock = settings.clock
        backend = open_backend(url, clock, settings.namespace)
        self.clock = clock
        """The clock every decision of this client (and the workflows on it) reads."""
        self._backend = backend
        self._admin = QueueAdmin(self._require_open, cache_ttl=settings.cache_ttl)
        self._items = ItemAdmin(self._require_open, self._admin.queue_info)
        notified = settings.notifications and backend.supports_notify
        self._board = WakeBoard()
        self._spreader = Spreader()
        self._calls = QueueCalls()
        self._transactions = Transactions(
            self._require_open, self._admin.queue_info, self._spreader, self._calls, self._board
        )
        self._gauges = queue_gauges.GaugeSource(self)
        self._background = ClientTasks(
            backend,
            self._board,
            clock,
            notified=notified,
            wait_for_store=settings.wait_for_store,
            maintenance_interval=settings.maintenance_interval,
            run_maintenance=self.run_maintenance,
            gauges=self._gauges,
            forget=self._admin.forget,
        )
        self._poll = LongPoll(
            self._board,
            clock,
            wait_cap=NOTIFIED_WAIT_CAP if notified else settings.poll_interval,
            notified=notified,
            listen=self._background.listen,
        )

    # -- lifecycle ----------------------------------------------------------
    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def open(self) -> None:
        """Connect, create the schema if needed, and start background tasks."""
        await self._background.open()

    async def close(self) -> None:
        """Stop background tasks and release connections. Data stays stored."""
        await self._background.close()

    def run_in_background(self, service: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``await service()`` as a background task of this client until it
        closes (the lock renewer); call it on the client's own event loop."""
        self._background.start(service)

    def _hot_path(self, loop: asyncio.AbstractEventLoop) -> HotPath:
        """The hot calls a sync shell runs on its callers' threads
        (:mod:`.hot_calls`); ``loop`` is this client's event loop."""
        return HotPath(
            self._backend, self._admin.cached, self._spreader, self._board, self.clock, loop
        )

    def _require_open(self) -> Backend:
        if not self._background.is_open:
            raise UsageError("the client is not open: use `async with AsyncQuerator(...)`")
        return self._backend

    # -- queues (QueueAdmin) -------------------------------------------------
    async def queue_info(self, name: str) -> QueueInfo:
        """The queue's info, from the settings cache when fresh (``cache_ttl``)."""
        return await self._admin.queue_info(name)

    async def create_queue(
        self, name: str, settings: QueueSettings | None = None, *, exist_ok: bool = False
    ) -> QueueInfo:
        """Create a queue; raises QueueExists when the name is taken, unless
        ``exist_ok``, which returns the existing queue as it is (settings unchanged)."""
        return await self._admin.create_queue(name, settings, exist_ok=exist_ok)

    async def update_queue(self, name: str, settings: QueueSettings) -> QueueInfo:
        """Replace a queue's settings. They apply to new leases and new items;
        existing leases keep their deadlines. Partitions may only grow."""
        return await self._admin.update_queue(name, settings)

    async def delete_queue(self, name: str, *, force: bool = False) -> None:
        """Delete a queue. One that still holds items raises QueueNotEmpty (naming
        how many; nothing is deleted) unless ``force``, which drops them with it.
        A queue that is another queue's dead queue cannot be deleted until that
        queue names another."""
        await self._admin.delete_queue(name, force=force)

    async def get_queue(self, name: str) -> QueueInfo:
        """The queue's current info (always read from the store)."""
        return await self._admin.get_queue(name)

    async def list_queues(self, pivot: str | None = None, limit: int = 100) -> list[QueueInfo]:
        """Queues in name order, starting at ``pivot`` (inclusive)."""
        return await self._admin.list_queues(pivot, limit)

    async def pause_queue(self, name: str) -> QueueInfo:
        """Pause a queue: its items are not leased (a lease waits as if it were
        empty, and a lease that must not wait finds nothing) until it is
        resumed; produce still adds items, and held leases stay held. Clients
        of the store that wait for wakeups are told at once; others see it
        within their ``cache_ttl``. Pausing a paused queue changes nothing."""
        return await self._admin.set_paused(name, True)

    async def resume_queue(self, name: str) -> QueueInfo:
        """Resume a paused queue: its items are leased again, and the leases
        waiting on it look at once. Resuming a queue not paused changes nothing."""
        info = await self._admin.set_paused(name, False)
        self._board.wake(name)
        return info

    # -- items --------------------------------------------------------------
    async def produce(self, queue: str, items: Sequence[Item]) -> list[str]:
        """Add 1 to 1000 items to ``queue``; returns their ids in order.

        An item whose ``dedup_key`` is already held by an item in the queue is
        not added: the existing item's id is returned in its place.
        """
        backend = self._require_open()
        info = await self.queue_info(queue)
        check_sequence("items", items, "querator.Item")
        if observing():

            def store(carrier: Carrier) -> Coroutine[Any, Any, list[str]]:
                routed = route_items(info, items, self._spreader, trace=carrier(queue))
                return backend.produce(info, routed)

            ids = await self._calls.produce(queue, len(items), store)
        else:
            ids = await backend.produce(info, route_items(info, items, self._spreader))
        self._board.wake(queue)
        return ids

    async def produce_steps(self, queue: str, items: Sequence[Item]) -> ProduceSteps:
        """The statements that produce ``items`` into ``queue`` on a connection the
        application owns (run by :mod:`querator.queue.foreign`), checked and routed
        as :meth:`produce`; InvalidArgument on stores that cannot (SQLite, memory)."""
        backend = self._require_open()
        info = await self.queue_info(queue)
        check_sequence("items", items, "querator.Item")
        return backend.produce_steps(info, route_items(info, items, self._spreader))

    async def lease(
        self,
        queue: str,
        *,
        client_id: str,
        batch_size: int = 1,
        timeout: float = 0.0,
        kinds: Iterable[str] | None = None,
        complete: Sequence[RefLike] = (),
    ) -> list[Leased]:
        """Lease up to ``batch_size`` items, waiting up to ``timeout`` seconds for one.

        Returns as soon as at least one item is available. Raises
        :class:`RequestTimeout` when none came within ``timeout`` (also when
        ``timeout`` is 0 and the queue has nothing leasable now). With
        ``kinds``, only items whose ``kind`` is one of them are leased (and
        waited for); the others keep their place for the clients that take
        them, untouched.

        ``complete``: leased items of ``queue`` to complete first, as
        :meth:`complete` does (all or nothing; a failed check raises before
        anything is leased): a consumer that loops passes its previous batch,
        and the store does both in one round trip where it can. They stay
        completed when the lease then times out.
        """
        backend = self._require_open()
        check_name("queue", queue)
        check_name("client_id", client_id)
        check_count("batch_size", batch_size, 1, MAX_BATCH)
        check_duration("timeout", timeout, allow_zero=True)
        wanted = check_kinds(kinds)
        if complete:
            first = await self._lease_completing(
                backend, queue, client_id, batch_size, wanted, complete
            )
            if first:
                return first
            if first is None:  # not done: the plan's path completes them, or names what is wrong
                await self.complete(queue, complete)
        leased, started = await self._poll.lease(
            backend, self._admin.queue_info, queue, client_id, batch_size, timeout, wanted
        )
        if observing():
            return self._calls.took(queue, client_id, leased, started)
        return leased.items

    async def _lease_completing(
        self,
        backend: Backend,
        queue: str,
        client_id: str,
        batch_size: int,
        wanted: Kinds,
        complete: Sequence[RefLike],
    ) -> list[Leased] | None:
        """Complete ``complete`` (held items of one partition) and lease from one
        partition in one round trip (:meth:`.backends.base.Backend.lease_completing`):
        what that leased, or None when it did not run (nothing changed)."""
        info = None if observing() else self._admin.cached(queue)
        if info is None or info.paused:
            return None
        done = one_table_refs(info, complete)
        if done is None:
            return None
        partition = lease_order(info.settings.partitions)[0]
        got = await backend.lease_completing(info, partition, client_id, batch_size, wanted, done)
        return None if got is None else got.items

    def watch(self, queue: str) -> Watch:
        """A watch on ``queue``'s wakeups (a produce, a retry or a dead-letter
        arrival, from any client of the store), starting now.

        Take the watch *before* looking for what you wait for, then
        ``await watch.wait(timeout)`` between looks: a change that lands between
        the look and the wait is not missed. Waiting issues no statement.
        """
        self._require_open()
        watch = Watch(self._board, check_name("queue", queue), self._poll.wait_cap)
        self._background.listen()
        return watch

    async def complete(self, queue: str, items: Sequence[RefLike]) -> None:
        """Finish leased items: they leave the queue. All or nothing."""
        if not observing():  # Leased items of one partition: one statement, no plan
            info = self._admin.cached(check_name("queue", queue))
            refs = None if info is None else one_table_refs(info, items)
            if refs is not None and await self._require_open().complete_table(refs):
                return
        await self._transactions.apply(change_request(queue, "complete", items))

    async def retry(
        self,
        queue: str,
        items: Sequence[RefLike],
        *,
        retry_at: datetime | None = None,
        dead: bool = False,
        reason: str | None = None,
    ) -> None:
        """Give leased items back: leasable again at ``retry_at`` (default now), at
        the tail; ``dead=True`` moves them to the dead queue now. An item whose
        attempts are used up is dead-lettered instead of retried. ``reason`` (the
        last error, say) goes with an item this dead-letters, with its attempts
        (:mod:`querator.queue.dead_reasons`)."""
        why = check_reason(reason)
        request = change_request(queue, "retry", items, retry_at=retry_at, dead=dead, reason=why)
        await self._transactions.apply(request)

    async def renew(
        self, queue: str, items: Sequence[RefLike], *, extend: float | None = None
    ) -> list[Leased]:
        """Extend held leases to now + ``extend`` seconds (default: the queue's
        lease_timeout); returns the items with their new versions."""
        request = change_request(queue, "renew", items, extend=extend)
        return (await self._transactions.apply(request)).renewed

    async def transact(self, **options: Unpack[TransactOptions]) -> TransactResult:
        """Apply completes, retries, renews, deletes, produces and version checks atomically.

        ``complete``, ``retry``, ``renew``, ``depends`` and ``delete`` take
        ``Leased`` items or ``Ref(queue, id, version)``; ``produce`` maps queue
        names to new items; ``retry_at`` is when retried items come back
        (default now); ``extend`` the seconds renewed leases get (default each
        queue's ``lease_timeout``). ``depends`` items must still hold the
        versions named; nothing is done to them. ``delete`` items must hold
        them and be held by no live lease; they are deleted (an item not yet
        taken by a consumer, never one leased since it was read). Either
        everything happens or nothing does; on failure
        :class:`~querator.errors.Conflict` lists every failed check by id.
        """
        check_options("transact", options, TransactOptions)
        return await self.commit(**options)

    async def commit(
        self,
        *,
        produce_leased: Mapping[str, Sequence[Item]] | None = None,
        client_id: str | None = None,
        lookup: Mapping[str, Sequence[str]] | None = None,
        silent: Collection[str] = (),
        wake: Collection[str] = (),
        durable: bool = True,
        **options: Unpack[TransactOptions],
    ) -> TransactResult:
        """:meth:`transact` with the knobs the layers built on the queue use (the
        workflow engine, webhooks, locks), which the HTTP API carries too
        (``/v1/queue.transact``): ``produce_leased`` (with ``client_id``),
        ``lookup``, ``silent``, ``wake`` and ``durable``, described at
        :class:`~querator.queue.plans.Transaction` (its ``claimed``, ``lookup``,
        ``silent``, ``wake`` and ``durable``)."""
        self._require_open()
        check_options("transact", options, TransactOptions)
        return await self._transactions.apply(
            commit_request(options, produce_leased, client_id, lookup, silent, wake, durable)
        )

    # -- items outside leasing (ItemAdmin) ---------------------------------
    async def stats(self, queue: str) -> QueueStats:
        """Counts per partition: total, leased, scheduled, dead-lettered, oldest age."""
        return await self._items.stats(queue)

    async def gauges(self, queue: str, *, limit: int = queue_gauges.LIMIT) -> QueueGauges:
        """Cheap counts per partition for metrics: depth, leased, scheduled and the
        age of the oldest leasable item, each read with a probe of at most ``limit``
        rows per partition (exact below it; see :class:`PartitionGauges` for the
        estimates past it). :meth:`stats` counts exactly and reads every row."""
        return await self._items.gauges(queue, limit=limit)

    async def publish_gauges(self) -> None:
        """Read every queue's gauges for the metric instruments now (they are
        otherwise read at most every 10 s, after a metric collection asked)."""
        self._require_open()
        await self._gauges.refresh()

    async def list_items(
        self, queue: str, *, partition: int = 0, pivot: str | None = None, limit: int = 100
    ) -> list[StoredItem]:
        """Items of one partition in id order, starting at ``pivot`` (inclusive)."""
        return await self._items.list_items(queue, partition=partition, pivot=pivot, limit=limit)

    async def list_scheduled(
        self, queue: str, *, partition: int = 0, pivot: str | None = None, limit: int = 100
    ) -> list[StoredItem]:
        """Scheduled (not yet due, never-leased or retried-later) items, like list_items."""
        return await self._items.list_scheduled(
            queue, partition=partition, pivot=pivot, limit=limit
        )

    async def lookup(self, queue: str, dedup_keys: Sequence[str]) -> dict[str, StoredItem]:
        """The items of ``queue`` that hold any of ``dedup_keys`` now, by key.

        Keys held by no item are absent from the result. 1 to 1000 keys.
        """
        return await self._items.lookup(queue, dedup_keys)

    async def scan_keys(
        self, queue: str, prefix: str, *, after: str | None = None, limit: int = 100
    ) -> list[StoredItem]:
        """Items of ``queue`` whose dedup key starts with ``prefix``, in key order.

        Keys compare by code point (as Python compares strings), across all
        partitions. Pass the last key of a page as ``after`` for the next page.
        Every backend answers from its dedup-key index, so a page costs
        ``limit`` rows whatever the queue holds. 1 to 1000 items a page.
        """
        return await self._items.scan_keys(queue, prefix, after=after, limit=limit)

    async def delete_items(self, queue: str, ids: Sequence[str]) -> None:
        """Delete items by id whatever their state; all or nothing."""
        await self._items.delete_items(queue, ids)

    async def clear(self, queue: str, *, destructive: bool = False) -> int:
        """Delete every item not under a live lease (every item when
        ``destructive``); returns how many were deleted."""
        return await self._items.clear(queue, destructive=destructive)

    async def run_maintenance(self) -> int:
        """Dead-letter every exhausted or expired unheld item now; returns the count.

        Clients run this on their own every ``maintenance_interval``; call it to
        force the moves (tests, operations).
        """
        return await run_maintenance(self._require_open(), self._board.wake)


async def migrate_store(url: str, apply: bool = True) -> SchemaReport:
    """Create the schema of the store at ``url``, or migrate it to the newest
    version this querator knows (``apply=False``: only report what would be
    done); opening a client does the same, this lets operators choose the time."""
    return await open_backend(url).migrate(apply)
