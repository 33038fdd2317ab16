"""The queue service: validates, routes, waits and wakes; backends store.

:class:`AsyncQueueClient` is the one implementation of every queue operation;
the sync :class:`querator.Querator` is a thin shell that runs it on a
background event loop.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Collection, Coroutine, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from types import TracebackType
from typing import Any, NamedTuple, Self

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.abc import TaskGroup
from typing_extensions import Unpack

from querator.clock import SYSTEM, Clock
from querator.errors import InvalidArgument, RequestTimeout, Unavailable, UsageError
from querator.queue.admin import QueueAdmin
from querator.queue.backends import DEFAULT_URL, open_backend
from querator.queue.backends.base import Backend, Kinds, Leases, NewItem, TxnPlan
from querator.queue.ids import parse_id
from querator.queue.maintenance import maintain_forever, run_maintenance
from querator.queue.models import (
    Item,
    Leased,
    QueueGauges,
    QueueInfo,
    QueueStats,
    Ref,
    StoredItem,
    TransactResult,
)
from querator.queue.options import ClientOptions, TransactOptions, check_options
from querator.queue.outage import Backoff, Outage
from querator.queue.plans import RefLike, build_plan, check_unique, refs_of, route_items
from querator.queue.routing import Spreader, lease_order
from querator.queue.validation import (
    MAX_BATCH,
    check_batch,
    check_count,
    check_duration,
    check_keys,
    check_kinds,
    check_name,
    check_reason,
    check_sequence,
    key_range,
)
from querator.queue.waiting import WakeBoard, Watch, wait_for_wake
from querator.telemetry import messaging, queue_gauges, queue_metrics
from querator.telemetry.switches import metering, observing

Carrier = Callable[[str], Mapping[str, str] | None]
"""Per destination queue, the trace context its produced items get (or None)."""


def _no_trace(queue: str) -> None:
    return None


log = logging.getLogger("querator")

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


class AsyncQueueClient(QueueAdmin):
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
        check_options("Querator", options, ClientOptions)
        wait = options.get("wait_for_store", 0.0)
        poll_interval = check_duration("poll_interval", options.get("poll_interval", 1.0))
        maintenance = check_duration(
            "maintenance_interval", options.get("maintenance_interval", 5.0)
        )
        cache_ttl = check_duration("cache_ttl", options.get("cache_ttl", 1.0))
        clock = options.get("clock", SYSTEM)
        if not isinstance(clock, Clock):
            raise InvalidArgument(
                "clock", f"must be a querator.clock.Clock, got {type(clock).__name__}"
            )
        backend = open_backend(url, clock, options.get("namespace"))
        self.clock = clock
        """The clock every decision of this client (and the workflows on it) reads."""
        self._unsubscribe: Callable[[], None] | None = None
        self._wait_for_store = check_duration("wait_for_store", wait, allow_zero=True)
        super().__init__(backend, cache_ttl=cache_ttl)
        self._notified = options.get("notifications", True) and backend.supports_notify
        self._wait_cap = NOTIFIED_WAIT_CAP if self._notified else poll_interval
        self._maintenance_interval = maintenance
        self._board = WakeBoard()
        self._drained: dict[LookKey, anyio.Event] = {}
        """(Queue, kinds) -> the wakeup ticket under which a lease of it came back short."""
        self._empty: dict[LookKey, EmptyLook] = {}
        """(Queue, kinds) -> the last look of a waiting lease that found nothing leasable."""
        self._looking: dict[LookKey, tuple[anyio.Event, anyio.Event]] = {}
        """(Queue, kinds) -> (ticket, done) of the waiting lease looking at it now."""
        self._spreader = Spreader()
        self._lease_times = queue_metrics.LeaseClock()
        self._gauges = queue_gauges.GaugeSource(self)
        self._tasks: TaskGroup | None = None
        self._listening = False

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
        if self._tasks is not None:
            raise UsageError("this client is already open")
        await self._open_backend()
        tasks = anyio.create_task_group()
        await tasks.__aenter__()
        self._tasks = tasks
        self._unsubscribe = self.clock.on_advance(self._woken_by_clock())
        tasks.start_soon(
            maintain_forever, self._backend, self._maintenance_interval, self.run_maintenance
        )
        tasks.start_soon(self._gauges.serve, _gauges_failed)
        queue_gauges.register(self._gauges)

    async def _open_backend(self) -> None:
        """Open the backend, retrying while it is unavailable for ``wait_for_store``."""
        outage, backoff = Outage(log, "querator: opening the store"), Backoff(initial=0.2)
        give_up = anyio.current_time() + self._wait_for_store
        while True:
            try:
                await self._backend.open()
            except Unavailable as exc:
                delay = backoff.next()
                if anyio.current_time() + delay > give_up:
                    raise
                outage.lost(exc)
                await anyio.sleep(delay)
                continue
            outage.back()
            return

    async def close(self) -> None:
        """Stop background tasks and release connections. Data stays stored."""
        tasks, self._tasks = self._tasks, None
        if tasks is None:
            return
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        queue_gauges.unregister(self._gauges)
        tasks.cancel_scope.cancel()
        await tasks.__aexit__(None, None, None)
        await self._backend.close()

    def _woken_by_clock(self) -> Callable[[], None]:
        """A callback that wakes every waiter of this client from any thread (the
        clock moved: items may have come due, leases expired)."""
        token = anyio.lowlevel.current_token()
        loop_thread = threading.get_ident()

        def wake() -> None:
            if threading.get_ident() == loop_thread:
                self._board.wake_all()
            else:
                with contextlib.suppress(RuntimeError):  # the loop has ended
                    anyio.from_thread.run_sync(self._board.wake_all, token=token)

        return wake

    def run_in_background(self, service: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``await service()`` as a background task of this client until it
        closes (the lock renewer); call it on the client's own event loop."""
        if self._tasks is None:
            raise UsageError("the client is not open: use `async with AsyncQuerator(...)`")
        self._tasks.start_soon(service)

    def _require_open(self) -> Backend:
        if self._tasks is None:
            raise UsageError("the client is not open: use `async with AsyncQuerator(...)`")
        return self._backend

    def _listen(self) -> None:
        """Start the wakeup listener, the first time this client waits: a client
        that never waits (a producer) holds no listening connection and is not
        woken by its own notifications."""
        if self._listening or not self._notified or self._tasks is None:
            return
        self._listening = True
        self._tasks.start_soon(self._listen_forever)

    async def _listen_forever(self) -> None:
        outage, backoff = Outage(log, "querator: wakeup listener"), Backoff(initial=0.2)
        ready = self._board.wake_all

        def on_ready() -> None:
            outage.back()
            backoff.reset()
            ready()

        while True:
            try:
                await self._backend.listen(self._board.wake, on_ready)
            except Unavailable as exc:
                outage.lost(exc)
            except Exception:
                log.exception("querator: wakeup listener failed; retrying")
            self._board.wake_all()
            await anyio.sleep(backoff.next())

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
            ids = await self._produce_observed(backend, info, items)
        else:
            ids = await backend.produce(info, route_items(info, items, self._spreader))
        self._board.wake(queue)
        return ids

    async def _produce_observed(
        self, backend: Backend, info: QueueInfo, items: Sequence[Item]
    ) -> list[str]:
        """:meth:`produce`'s store call in its send span (its context in the items'
        headers), and its count."""
        queue = info.name
        with messaging.sending("produce", {queue: len(items)}) as send:
            routed = route_items(info, items, self._spreader, trace=send.carrier(queue))
            ids = await backend.produce(info, routed)
            send.produced({queue: ids})
        if metering():
            queue_metrics.count([(queue, len(ids))], "produced")
        return ids

    async def lease(
        self,
        queue: str,
        *,
        client_id: str,
        batch_size: int = 1,
        timeout: float = 0.0,
        kinds: Iterable[str] | None = None,
    ) -> list[Leased]:
        """Lease up to ``batch_size`` items, waiting up to ``timeout`` seconds for one.

        Returns as soon as at least one item is available. Raises
        :class:`RequestTimeout` when none came within ``timeout`` (also when
        ``timeout`` is 0 and the queue has nothing leasable now). With
        ``kinds``, only items whose ``kind`` is one of them are leased (and
        waited for); the others keep their place for the clients that take
        them, untouched.
        """
        backend = self._require_open()
        check_name("queue", queue)
        check_name("client_id", client_id)
        check_count("batch_size", batch_size, 1, MAX_BATCH)
        check_duration("timeout", timeout, allow_zero=True)
        wanted = check_kinds(kinds)
        look = (queue, wanted)
        deadline = anyio.current_time() + timeout
        backoff = 0.005
        while True:
            started = time.time_ns()
            ticket = self._board.ticket(queue)
            known = self._empty_look(look, ticket) if timeout > 0 else None
            # a shared look that still holds needs no settings look-up either
            info = known.info if known is not None else await self.queue_info(queue)
            if timeout > 0 and (self._drained.get(look) is ticket or known is not None):
                # A lease under this very ticket came back short, or another waiter
                # found the queue empty under it moments ago, and nothing was
                # produced or retried since: go straight to waiting (the timer
                # below still covers items that come due or whose lease expires).
                leased = NOTHING
            elif timeout > 0:
                leased = await self._look_shared(
                    backend, info, ticket, client_id, batch_size, wanted
                )
                known = self._empty_look(look, ticket)
            else:
                leased = await self._lease_once(backend, info, client_id, batch_size, wanted)
            if leased.items:
                if len(leased.items) < batch_size:
                    self._drained[look] = ticket
                else:
                    self._drained.pop(look, None)
                return (
                    self._took(queue, client_id, leased, started) if observing() else leased.items
                )
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                raise RequestTimeout(f"no item became available in {queue!r} within {timeout}s")
            wait = min(remaining, self._wait_cap)
            next_at = known.next_at if known else await backend.next_available_at(info, wanted)
            if next_at is not None:
                due_in = (next_at - self.clock.now()).total_seconds()
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

    def _took(self, queue: str, client_id: str, leases: Leases, started_ns: int) -> list[Leased]:
        """The items of a lease that found some, once its telemetry is recorded."""
        items = leases.items
        messaging.received(queue, client_id, items, started_ns)
        if metering():
            queue_metrics.waited(queue, leases.waited)
            self._lease_times.leased((item.id for item in items), time.monotonic())
        return items

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
            leased = await self._lease_once(backend, info, client_id, size, kinds)
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
        if anyio.current_time() - look.at >= self._wait_cap:
            return None
        if look.next_at is not None and look.next_at <= self.clock.now():
            return None
        return look

    @staticmethod
    async def _lease_once(
        backend: Backend, info: QueueInfo, client_id: str, batch_size: int, kinds: Kinds = None
    ) -> Leases:
        leased = NOTHING  # replaced by the first partition's, never appended to
        for partition in lease_order(info.settings.partitions):
            got = await backend.lease(
                info, partition, client_id, batch_size - len(leased.items), kinds
            )
            if not leased.items:
                leased = got
            else:
                leased.items.extend(got.items)
                leased.waited.extend(got.waited)
            if len(leased.items) >= batch_size:
                break
        return leased

    def watch(self, queue: str) -> Watch:
        """A watch on ``queue``'s wakeups (a produce, a retry or a dead-letter
        arrival, from any client of the store), starting now.

        Take the watch *before* looking for what you wait for, then
        ``await watch.wait(timeout)`` between looks: a change that lands between
        the look and the wait is not missed. Waiting issues no statement.
        """
        self._require_open()
        watch = Watch(self._board, check_name("queue", queue), self._wait_cap)
        self._listen()
        return watch

    async def complete(self, queue: str, items: Sequence[RefLike]) -> None:
        """Finish leased items: they leave the queue. All or nothing."""
        await self._change(queue, "complete", items)

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
        await self._change(queue, "retry", items, retry_at=retry_at, dead=dead, reason=why)

    async def renew(
        self, queue: str, items: Sequence[RefLike], *, extend: float | None = None
    ) -> list[Leased]:
        """Extend held leases to now + ``extend`` seconds (default: the queue's
        lease_timeout); returns the items with their new versions."""
        result = await self._change(queue, "renew", items, extend=extend)
        return result.renewed

    async def _change(
        self,
        queue: str,
        role: str,
        items: Sequence[RefLike],
        *,
        retry_at: datetime | None = None,
        dead: bool = False,
        extend: float | None = None,
        reason: str | None = None,
    ) -> TransactResult:
        check_name("queue", queue)
        refs = refs_of(queue, items, "items")
        check_batch("items", len(refs))
        return await self._transact({role: refs}, {}, retry_at, dead, extend, reason=reason)

    async def transact(self, **options: Unpack[TransactOptions]) -> TransactResult:
        """Apply completes, retries, renews, produces and version checks atomically.

        ``complete``, ``retry``, ``renew`` and ``depends`` take ``Leased`` items
        or ``Ref(queue, id, version)``; ``produce`` maps queue names to new
        items; ``retry_at`` is when retried items come back (default now);
        ``extend`` the seconds renewed leases get (default each queue's
        ``lease_timeout``). ``depends`` items must still hold the versions
        named; nothing is done to them. Either everything happens or nothing
        does; on failure :class:`~querator.errors.Conflict` lists every failed
        check by id.
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
        **options: Unpack[TransactOptions],
    ) -> TransactResult:
        """:meth:`transact` with the knobs of the layers built on the queue (the
        workflow engine's commits); not part of the client API the HTTP API mirrors.

        ``produce_leased`` produces items like ``produce`` and leases each one
        that is leasable at once to ``client_id`` (required with it), for its
        queue's ``lease_timeout``: a hand-off to yourself that skips the round
        trip of a ``lease``. ``TransactResult.leased`` holds, per queue and in
        order, the :class:`Leased` item or None (scheduled later, or a dedup hit
        on an item another client holds).

        ``lookup`` (queue -> dedup keys) asks, like :meth:`lookup`, which items
        hold those keys once the transaction is applied: the answer, in
        ``TransactResult.found``, includes the transaction's own changes and
        whatever other clients committed before it. PostgreSQL answers in the
        same round trip; the other stores look up right after.

        ``silent`` names queues this transaction does not wake: their waiting
        consumers and watchers are not notified of it (for records nobody waits
        for; the items are leasable all the same, and a waiter finds them at its
        next look, within its wait cap).
        """
        self._require_open()
        check_options("transact", options, TransactOptions)
        if produce_leased and client_id is None:
            raise InvalidArgument("client_id", "is required with produce_leased")
        if client_id is not None:
            check_name("client_id", client_id)
        groups = {
            "complete": refs_of(None, options.get("complete", ()), "complete"),
            "retry": refs_of(None, options.get("retry", ()), "retry"),
            "renew": refs_of(None, options.get("renew", ()), "renew"),
            "depends": refs_of(None, options.get("depends", ()), "depends"),
        }
        for field, refs in groups.items():
            if len(refs) > MAX_BATCH:
                check_batch(field, len(refs))
        produce = options.get("produce") or {}
        if not any(groups.values()) and not produce and not produce_leased:
            check_batch("transact", 0)
        claim = (client_id, produce_leased) if produce_leased else None
        keys = {name: check_keys(keys) for name, keys in (lookup or {}).items()}
        if isinstance(silent, str):
            raise InvalidArgument("silent", "must be a list of queue names, not one string")
        quiet = frozenset(check_name("silent", name) for name in silent)
        retry_at, extend = options.get("retry_at"), options.get("extend")
        return await self._transact(groups, produce, retry_at, False, extend, claim, keys, quiet)

    async def _transact(
        self,
        groups: Mapping[str, Sequence[Ref]],
        produce: Mapping[str, Sequence[Item]],
        retry_at: datetime | None,
        dead: bool,
        extend: float | None,
        claim: tuple[str | None, Mapping[str, Sequence[Item]]] | None = None,
        lookup: Mapping[str, list[str]] | None = None,
        silent: frozenset[str] = frozenset(),
        reason: str | None = None,
    ) -> TransactResult:
        backend = self._require_open()
        check_unique(groups)
        client_id, claimed = claim or (None, {})
        _check_produce("produce", produce)
        _check_produce("produce_leased", claimed)
        lookup = lookup or {}
        names = {ref.queue for refs in groups.values() for ref in refs}
        names |= set(produce) | set(claimed) | set(lookup)
        queues = {name: await self.queue_info(check_name("queue", name)) for name in names}
        for info in list(queues.values()):
            if info.settings.dead_queue:
                queues[info.settings.dead_queue] = await self.queue_info(info.settings.dead_queue)

        def plan(carrier: Carrier) -> TxnPlan:
            def routed(
                field: str, by_queue: Mapping[str, Sequence[Item]]
            ) -> list[tuple[str, Sequence[NewItem]]]:
                return [
                    (
                        name,
                        route_items(
                            queues[name], items, self._spreader, f"{field}[{name!r}]", carrier(name)
                        ),
                    )
                    for name, items in by_queue.items()
                ]

            made = build_plan(queues, groups, routed("produce", produce), retry_at, dead, extend)
            if reason is not None:
                made = replace(made, retry=[replace(op, reason=reason) for op in made.retry])
            if claimed:
                made = replace(made, claim=routed("produce_leased", claimed), client_id=client_id)
            if lookup or silent:
                made = replace(made, lookup=list(lookup.items()), silent=silent)
            return made

        if observing():
            result = await self._transact_observed(backend, groups, produce, claimed, plan)
        else:
            result = await backend.transact(plan(_no_trace))
        missing = [name for name in lookup if name not in result.found]
        if missing:
            found = dict(result.found)
            for name in missing:
                held = await backend.lookup(queues[name], lookup[name])
                found[name] = {item.dedup_key: item for item in held if item.dedup_key}
            result = result.model_copy(update={"found": found})
        self._wake_after(queues, groups, produce, result, silent)
        return result

    def _wake_after(
        self,
        queues: Mapping[str, QueueInfo],
        groups: Mapping[str, Sequence[Ref]],
        produce: Mapping[str, Sequence[Item]],
        result: TransactResult,
        silent: frozenset[str],
    ) -> None:
        """Wake local waiters where a transaction may have made something leasable:
        completes, renews and items leased to the caller make nothing new available."""
        woken = {name for name, items in produce.items() if items}
        for ref in groups.get("retry", ()):
            woken.add(ref.queue)
            dead_queue = queues[ref.queue].settings.dead_queue
            if dead_queue:
                woken.add(dead_queue)
        woken |= {name for name, got in result.leased.items() if None in got}
        for name in woken - silent:
            self._board.wake(name)

    async def _transact_observed(
        self,
        backend: Backend,
        groups: Mapping[str, Sequence[Ref]],
        produce: Mapping[str, Sequence[Item]],
        claimed: Mapping[str, Sequence[Item]],
        plan: Callable[[Carrier], TxnPlan],
    ) -> TransactResult:
        """:meth:`_transact`'s store call with a send span per destination queue
        (their contexts in the produced items' headers) and its metrics."""
        batches = {name: len(items) for name, items in produce.items() if items}
        for name, items in claimed.items():
            batches[name] = batches.get(name, 0) + len(items)
        settled = {
            role: [(ref.queue, ref.id) for ref in groups[role]]
            for role in ("complete", "retry")
            if groups.get(role)
        }
        with messaging.settling(settled), messaging.sending("transact", batches) as send:
            result = await backend.transact(plan(send.carrier))
            send.produced(result.produced)
        if metering():
            self._count(groups, result)
        return result

    def _count(self, groups: Mapping[str, Sequence[Ref]], result: TransactResult) -> None:
        """The counters and lease latencies of an applied transaction."""
        now = time.monotonic()
        completes, retries = groups.get("complete", ()), groups.get("retry", ())
        if completes:
            queue_metrics.count(
                queue_metrics.per_queue([r.queue for r in completes]).items(), "completed"
            )
            self._lease_times.finished(((r.queue, r.id) for r in completes), now, done=True)
        if retries:
            queue_metrics.count(
                queue_metrics.per_queue([r.queue for r in retries]).items(), "retried"
            )
            self._lease_times.finished(((r.queue, r.id) for r in retries), now, done=False)
        produced = [(name, len(ids)) for name, ids in result.produced.items()]
        produced += [(name, len(got)) for name, got in result.leased.items()]
        queue_metrics.count(produced, "produced")
        for got in result.leased.values():
            self._lease_times.leased((item.id for item in got if item is not None), now)

    # -- inspection ---------------------------------------------------------
    async def stats(self, queue: str) -> QueueStats:
        """Counts per partition: total, leased, scheduled, dead-lettered, oldest age."""
        backend = self._require_open()
        info = await self.queue_info(queue)
        return QueueStats(queue=queue, partitions=await backend.stats(info))

    async def gauges(self, queue: str, *, limit: int = queue_gauges.LIMIT) -> QueueGauges:
        """Cheap counts per partition for metrics: depth, leased, scheduled and the
        age of the oldest leasable item, each read with a probe of at most ``limit``
        rows per partition (exact below it; see :class:`PartitionGauges` for the
        estimates past it). :meth:`stats` counts exactly and reads every row."""
        backend = self._require_open()
        info = await self.queue_info(queue)
        check_count("limit", limit, 1, 1_000_000)
        return QueueGauges(queue=queue, partitions=await backend.gauges(info, limit))

    async def publish_gauges(self) -> None:
        """Read every queue's gauges for the metric instruments now (they are
        otherwise read at most every 10 s, after a metric collection asked)."""
        self._require_open()
        await self._gauges.refresh()

    async def list_items(
        self, queue: str, *, partition: int = 0, pivot: str | None = None, limit: int = 100
    ) -> list[StoredItem]:
        """Items of one partition in id order, starting at ``pivot`` (inclusive)."""
        return await self._list(queue, partition, pivot, limit, scheduled_only=False)

    async def list_scheduled(
        self, queue: str, *, partition: int = 0, pivot: str | None = None, limit: int = 100
    ) -> list[StoredItem]:
        """Scheduled (not yet due, never-leased or retried-later) items, like list_items."""
        return await self._list(queue, partition, pivot, limit, scheduled_only=True)

    async def _list(
        self, queue: str, partition: int, pivot: str | None, limit: int, scheduled_only: bool
    ) -> list[StoredItem]:
        backend = self._require_open()
        info = await self.queue_info(queue)
        check_count("partition", partition, 0, info.settings.partitions - 1)
        check_count("limit", limit, 1, MAX_BATCH)
        pivot_seq = None
        if pivot is not None:
            address = parse_id(pivot)
            if address is None or address.queue_id != info.queue_id:
                raise InvalidArgument("pivot", f"{pivot!r} is not an item id of queue {queue!r}")
            pivot_seq = address.seq
        return await backend.list_items(info, partition, pivot_seq, limit, scheduled_only)

    async def lookup(self, queue: str, dedup_keys: Sequence[str]) -> dict[str, StoredItem]:
        """The items of ``queue`` that hold any of ``dedup_keys`` now, by key.

        Keys held by no item are absent from the result. 1 to 1000 keys.
        """
        backend = self._require_open()
        info = await self.queue_info(queue)
        found = await backend.lookup(info, check_keys(dedup_keys))
        return {item.dedup_key: item for item in found if item.dedup_key is not None}

    async def scan_keys(
        self, queue: str, prefix: str, *, after: str | None = None, limit: int = 100
    ) -> list[StoredItem]:
        """Items of ``queue`` whose dedup key starts with ``prefix``, in key order.

        Keys compare by code point (as Python compares strings), across all
        partitions. Pass the last key of a page as ``after`` for the next page.
        Every backend answers from its dedup-key index, so a page costs
        ``limit`` rows whatever the queue holds. 1 to 1000 items a page.
        """
        backend = self._require_open()
        info = await self.queue_info(queue)
        low, include_low, high = key_range(prefix, after)
        check_count("limit", limit, 1, MAX_BATCH)
        return await backend.scan_keys(info, low, include_low, high, limit)

    async def delete_items(self, queue: str, ids: Sequence[str]) -> None:
        """Delete items by id whatever their state; all or nothing."""
        backend = self._require_open()
        info = await self.queue_info(queue)
        check_batch("ids", len(check_sequence("ids", ids, "item ids")))
        keys = []
        for item_id in ids:
            address = parse_id(item_id)
            if address is None or address.queue_id != info.queue_id:
                keys.append((str(item_id), 0, -1))
            else:
                keys.append((item_id, address.partition, address.seq))
        if len({k[0] for k in keys}) != len(keys):
            raise InvalidArgument("ids", "an id appears more than once")
        await backend.delete_items(info, keys)

    async def clear(self, queue: str, *, destructive: bool = False) -> int:
        """Delete every item not under a live lease (every item when
        ``destructive``); returns how many were deleted."""
        backend = self._require_open()
        return await backend.clear(await self.queue_info(queue), destructive)

    async def run_maintenance(self) -> int:
        """Dead-letter every exhausted or expired unheld item now; returns the count.

        Clients run this on their own every ``maintenance_interval``; call it to
        force the moves (tests, operations).
        """
        return await run_maintenance(self._require_open(), self._board.wake)


def _check_produce(field: str, by_queue: object) -> None:
    """A transaction's ``produce`` (or ``produce_leased``): a dict of lists."""
    if not isinstance(by_queue, Mapping):
        raise InvalidArgument(field, "must be a dict: queue name -> list of querator.Item")
    for name, items in by_queue.items():
        check_sequence(f"{field}[{name!r}]", items, "querator.Item")


def _gauges_failed(exc: Exception) -> None:
    log.warning("querator: reading the queue gauges failed: %s", exc)
