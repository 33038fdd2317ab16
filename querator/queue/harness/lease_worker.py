"""The lifecycle of a lease worker, written once: services plug in hooks.

:meth:`LeaseWorker._serve` runs it:

1. :meth:`~LeaseWorker._start` (create queues, log that it serves);
2. the :class:`~querator.queue.harness.renewal.Renewer` and
   :meth:`~LeaseWorker._keep`'s tasks run until the very end;
   :meth:`~LeaseWorker._poll` starts the lease loops
   (:meth:`~LeaseWorker._lease_loop`: leases within ``concurrency``, rides a
   store outage with the shared capped backoff, logged once per outage) and
   whatever else stops with polling;
3. on the first :meth:`~LeaseWorker.stop`: polling stops,
   :meth:`~LeaseWorker._stopped_polling`, then the items in hand may finish
   for ``shutdown_grace`` seconds (a second ``stop`` cuts that short);
   whatever is left is released (:meth:`~LeaseWorker._release_held`, within
   :data:`RELEASE_WITHIN` seconds: past that it is left to its lease) and its
   task cancelled;
4. :meth:`~LeaseWorker._drained`, then :meth:`~LeaseWorker._closed`, even
   after a failure.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import TaskGroup
from anyio.lowlevel import EventLoopToken, checkpoint

from querator.errors import RequestTimeout, Unavailable
from querator.queue.harness.renewal import Renewer
from querator.queue.harness.stopping import StopRequest
from querator.queue.models import Leased
from querator.queue.outage import Backoff, Outage
from querator.queue.service import AsyncQueueClient

__all__ = ["RELEASE_WITHIN", "LeaseWorker"]

RELEASE_WITHIN = 5.0
"""Seconds past the grace a stopping worker spends releasing the items in hand;
whatever it could not release by then (the store blocked or gone) is left to
its lease, which expires: another worker takes it then, nothing is lost."""


class LeaseWorker(ABC):
    """A service that leases items and handles each in a task of its own, or
    a batch in fewer (:meth:`_hand_over`; see the module doc); subclasses write
    :meth:`_poll`, :meth:`_handle` and :meth:`_release_held`, and the other
    hooks they need.

    ``name`` starts its log lines (``worker w-1``); ``concurrency`` bounds the
    items in hand; ``shutdown_grace`` is how long they may finish after
    :meth:`stop`.
    """

    def __init__(
        self,
        aq: AsyncQueueClient,
        log: logging.Logger,
        name: str,
        *,
        concurrency: int,
        shutdown_grace: float,
        renewing: str,
    ) -> None:
        self.aq = aq
        self.concurrency = concurrency
        self.shutdown_grace = shutdown_grace
        self.renewer = Renewer(aq, log, renewing)
        """Keeps the leases of the items in hand alive (``renewing``: what they are)."""
        self._log = log
        self._name = name
        self._stops = StopRequest()
        self._in_hand = 0
        self._room: anyio.Event | None = None
        """Set when an item in hand finishes (None: nobody waits for that)."""

    # -- what callers use ------------------------------------------------------
    def stop(self) -> None:
        """Stop leasing and shut down gracefully; again: release the items in
        hand now. Safe from any thread (and from signal handlers)."""
        self._stops.request()

    @property
    def stop_requested(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stops.requested

    @property
    def token(self) -> EventLoopToken | None:
        """The event loop serving (None while not serving)."""
        return self._stops.token

    @property
    def in_hand(self) -> int:
        """Items leased and not finished yet."""
        return self._in_hand

    # -- the lifecycle ---------------------------------------------------------
    async def _serve(self) -> None:
        """Serve until :meth:`stop`, then shut down gracefully (module doc)."""
        self._room = None
        self._stops.bind()
        try:
            await self._start()
            async with anyio.create_task_group() as keeper:
                keeper.start_soon(self.renewer.run)
                self._keep(keeper)
                async with anyio.create_task_group() as items:
                    async with anyio.create_task_group() as pollers:
                        self._poll(pollers, items)
                        await self._stops.stopping.wait()
                        pollers.cancel_scope.cancel()
                    await self._stopped_polling()
                    self._log.info("%s stopping: %d item(s) in hand", self._name, self._in_hand)
                    if not await self._drain():
                        with anyio.move_on_after(RELEASE_WITHIN):
                            await self._release_held()
                        items.cancel_scope.cancel()
                await self._drained()
                keeper.cancel_scope.cancel()
        finally:
            self._stops.unbind()
            await self._closed()

    async def _drain(self) -> bool:
        """Wait up to the grace period (or a hurry) for the items in hand; True if none left."""
        async with anyio.create_task_group() as waiters:

            async def finished() -> None:
                while self._in_hand > 0:
                    await self._finish()
                waiters.cancel_scope.cancel()

            async def hurried() -> None:
                await self._stops.hurry.wait()
                waiters.cancel_scope.cancel()

            waiters.start_soon(finished)
            waiters.start_soon(hurried)
            await anyio.sleep(self.shutdown_grace)
            waiters.cancel_scope.cancel()
        return self._in_hand == 0

    async def _lease_loop(
        self,
        queue: str,
        items: TaskGroup,
        lease: Callable[[int], Awaitable[list[Leased]]],
        *,
        share: int = 1,
        most: int | None = None,
    ) -> None:
        """Lease from ``queue`` (``lease(n)`` asks for up to ``n`` items) while
        there is room, forever; each batch is handed to :meth:`_hand_over`.

        ``share``: the loops sharing the room (each asks for its share of it);
        ``most``: the largest batch asked for. A store outage is logged once
        and ridden with capped backoff; any other failure is logged and
        retried the same way.
        """
        outage = Outage(self._log, f"{self._name}: lease from {queue}")
        backoff = Backoff()
        while True:
            while self._in_hand >= self.concurrency:
                await self._finish()
            free = max(1, (self.concurrency - self._in_hand) // share)
            try:
                batch = await lease(free if most is None else min(free, most))
            except RequestTimeout:
                outage.back()
                backoff.reset()
                await checkpoint()  # a lease that timed out at once never starves the loop
                continue
            except Unavailable as exc:
                outage.lost(exc)  # logged once per outage; retried with capped backoff
                await anyio.sleep(backoff.next())
                continue
            except Exception:
                self._log.exception("%s: lease from %s failed; retrying", self._name, queue)
                await anyio.sleep(backoff.next())
                continue
            outage.back()
            backoff.reset()
            for leased in batch:
                self._took_in_hand(leased)
            self._hand_over(batch, items)

    def _took_in_hand(self, leased: Leased) -> None:
        """``leased`` is in hand now (until :meth:`_handled`)."""
        self._in_hand += 1
        self._took(leased)

    def _hand_over(self, batch: list[Leased], items: TaskGroup) -> None:
        """Start handling a leased batch in tasks of ``items`` (by default one
        task per item, :meth:`_handle_one`); each item ends with :meth:`_handled`."""
        for leased in batch:
            items.start_soon(self._handle_one, leased)

    async def _handle_one(self, leased: Leased) -> None:
        try:
            await self._handle(leased)
        finally:
            self._handled()

    def _handled(self) -> None:
        """One item in hand is finished (its room goes to the lease loops)."""
        self._in_hand -= 1
        if self._room is not None:
            self._room.set()
            self._room = None

    async def _finish(self) -> None:
        """Wait until an item in hand finishes (one event shared by every waiter)."""
        if self._room is None:
            self._room = anyio.Event()
        await self._room.wait()

    # -- the hooks -------------------------------------------------------------
    async def _start(self) -> None:
        """Before anything is leased (create queues, log that it serves)."""
        return None  # optional: nothing by default

    def _keep(self, group: TaskGroup) -> None:
        """Start the tasks that run until the very end (after the drain)."""
        return None  # optional: nothing by default

    @abstractmethod
    def _poll(self, group: TaskGroup, items: TaskGroup) -> None:
        """Start the lease loops (:meth:`_lease_loop`) and whatever else stops
        with polling, in ``group``; items go to ``items``."""

    def _took(self, leased: Leased) -> None:
        """``leased`` was just leased (its task is about to start)."""
        return None  # optional: nothing by default

    @abstractmethod
    async def _handle(self, leased: Leased) -> None:
        """Handle one leased item (never raises: a failure is logged here)."""

    async def _stopped_polling(self) -> None:
        """Polling stopped; the items in hand are about to drain."""
        return None  # optional: nothing by default

    @abstractmethod
    async def _release_held(self) -> None:
        """The grace period is over: give back the items still in hand (bounded
        by :data:`RELEASE_WITHIN`)."""

    async def _drained(self) -> None:
        """The items' tasks are over (the renewer still runs)."""
        return None  # optional: nothing by default

    async def _closed(self) -> None:
        """The run is over, whether it failed or not (close what it opened)."""
        return None  # optional: nothing by default
