"""The delivery worker: leases deliveries and sends them, each endpoint behind its gate.

One asyncio task per leased delivery; the number of deliveries in hand is
bounded by ``concurrency``. A delivery whose endpoint has no room (its
``max_in_flight`` attempts are running, its rate limit is reached, it asked
for a pause, or an earlier message of the same ordering key is pending) is
deferred: given back to the queue with a ``retry_at`` (see
:mod:`querator.webhooks.gates`), never held while it waits. So a hanging
endpoint holds at most ``max_in_flight`` of the worker's slots, and the
others' deliveries keep flowing.

Each attempt's outcome is committed with the completion of its delivery item
in one transaction: the attempt record, and the next attempt (a new item due
at its retry time) or the dead letter. The lease is renewed while the attempt
runs. A worker killed mid-attempt loses nothing: the lease expires (within
the deliveries queue's ``lease_timeout``) and the delivery is attempted
again, with the same ``webhook-id``.
"""

from __future__ import annotations

import itertools
import logging
import os
import secrets
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import timedelta

import anyio
from anyio.abc import TaskGroup
from anyio.lowlevel import EventLoopToken, current_token
from pydantic import ValidationError

from querator.errors import Conflict, QueratorError, RequestTimeout, Unavailable
from querator.queue.models import Leased
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import MAX_BATCH, check_count, check_duration
from querator.telemetry import messaging, webhook_metrics
from querator.webhooks.cache import EndpointCache
from querator.webhooks.delivery import Sender
from querator.webhooks.endpoints import Endpoint
from querator.webhooks.gates import RECHECK, Gates
from querator.webhooks.layout import (
    ATTEMPTS,
    DEAD,
    DELIVERIES,
    Delivery,
    Outcome,
    ensure_queues,
)
from querator.webhooks.outcomes import Decision, dead_item, decide
from querator.webhooks.registry import change
from querator.webhooks.settings import WebhookSettings

__all__ = ["DEFAULT_SHUTDOWN_GRACE", "AsyncDeliveryWorker"]

log = logging.getLogger("querator.webhooks")

DEFAULT_SHUTDOWN_GRACE = 20.0


@dataclass
class _Held:
    """A delivery in hand (waiting for room, or attempted): the renewer keeps
    ``leased`` current."""

    leased: Leased


class AsyncDeliveryWorker:
    """Delivers webhooks until :meth:`stop` (see the module doc).

    ``concurrency`` bounds the deliveries in hand (attempts running plus
    items being looked at); ``endpoint_ttl`` is how old the worker's copy of
    an endpoint may be. On :meth:`stop` it stops leasing and lets the
    attempts in flight finish for up to ``shutdown_grace`` seconds; those
    still running then are given back to the queue at once.
    """

    def __init__(
        self,
        aq: AsyncQueueClient,
        settings: WebhookSettings | None = None,
        *,
        concurrency: int = 200,
        client_id: str | None = None,
        batch_size: int = 100,
        poll_timeout: float = 5.0,
        shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE,
        endpoint_ttl: float = 2.0,
    ) -> None:
        self.aq = aq
        self.settings = settings or WebhookSettings()
        self.concurrency = check_count("concurrency", concurrency, 1, 100_000)
        self.batch_size = check_count("batch_size", batch_size, 1, 1_000)
        self.poll_timeout = check_duration("poll_timeout", poll_timeout)
        self.shutdown_grace = check_duration("shutdown_grace", shutdown_grace, allow_zero=True)
        self.client_id = client_id or f"webhooks-{socket.gethostname()}-{os.getpid()}"
        self.client_id += f"-{secrets.token_hex(3)}" if client_id is None else ""
        self.cache = EndpointCache(aq, check_duration("endpoint_ttl", endpoint_ttl))
        self.gates = Gates()
        self.counts: dict[str, int] = {"delivered": 0, "retrying": 0, "dead": 0, "deferred": 0}
        """Since this worker started: attempts by outcome, and deferrals."""
        self._sender = Sender(self.settings)
        self._held: dict[str, _Held] = {}
        self._marking: set[str] = set()
        self._waiters: dict[str, deque[anyio.Event]] = {}
        """Endpoint id -> items waiting for room there, first come first woken."""
        self._tokens = itertools.count()
        self._in_hand = 0
        self._stop_requested = False
        self._loop_token: EventLoopToken | None = None
        self._loop_thread = 0
        self._lease = self.settings.lease_timeout
        """The deliveries queue's lease_timeout (read from the queue when running)."""

    # -- lifecycle -------------------------------------------------------------
    def stop(self) -> None:
        """Stop leasing and shut down gracefully; safe from any thread."""
        self._stop_requested = True
        token = self._loop_token
        if token is None:
            return
        if threading.get_ident() == self._loop_thread:
            self._stop.set()
        else:
            anyio.from_thread.run_sync(self._stop.set, token=token)

    async def arun(self) -> None:
        """Deliver until :meth:`stop`, then shut down gracefully."""
        self._renewing = anyio.Lock()
        self._room = anyio.Event()
        self._stop = anyio.Event()
        self._loop_thread = threading.get_ident()
        self._loop_token = current_token()
        if self._stop_requested:
            self._stop.set()
        await ensure_queues(self.aq, self.settings)
        self._lease = (await self.aq.get_queue(DELIVERIES)).settings.lease_timeout
        log.info("webhooks: worker %s delivering", self.client_id)
        try:
            async with anyio.create_task_group() as keeper:
                keeper.start_soon(self._renew_forever)
                keeper.start_soon(self.cache.refresh_forever)
                async with anyio.create_task_group() as items:
                    async with anyio.create_task_group() as poller:
                        poller.start_soon(self._poll, items)
                        await self._stop.wait()
                        poller.cancel_scope.cancel()
                    if not await self._drain():
                        await self._release_held()
                        items.cancel_scope.cancel()
                keeper.cancel_scope.cancel()
        finally:
            self._loop_token = None
            await self._sender.close()
        log.info("webhooks: worker %s stopped (%s)", self.client_id, self.counts)

    async def _drain(self) -> bool:
        with anyio.move_on_after(self.shutdown_grace):
            while self._in_hand:
                self._room = anyio.Event()
                await self._room.wait()
            return True
        return False

    async def _release_held(self) -> None:
        if self._held:
            log.info("webhooks: giving back %d delivery(ies) still in flight", len(self._held))
            try:
                async with self._renewing:
                    await self.aq.retry(DELIVERIES, [h.leased for h in self._held.values()])
            except QueratorError as exc:
                log.warning("webhooks: could not give deliveries back (they expire): %s", exc)

    # -- leasing ---------------------------------------------------------------
    async def _poll(self, items: TaskGroup) -> None:
        while True:
            while self._in_hand >= self.concurrency:
                self._room = anyio.Event()
                await self._room.wait()
            want = min(self.batch_size, self.concurrency - self._in_hand)
            try:
                batch = await self.aq.lease(
                    DELIVERIES, client_id=self.client_id, batch_size=want, timeout=self.poll_timeout
                )
            except RequestTimeout:
                continue
            except Unavailable as exc:
                log.warning("webhooks: store unavailable: %s", exc)
                await anyio.sleep(1.0)
                continue
            self._in_hand += len(batch)
            for leased in batch:
                items.start_soon(self._handle, leased)

    async def _handle(self, leased: Leased) -> None:
        try:
            await self._process(leased)
        except Conflict:
            log.debug("webhooks: lost the lease of %s (another worker has it)", leased.id)
        except Unavailable as exc:
            log.warning("webhooks: store unavailable, %s will be retried: %s", leased.id, exc)
        except Exception:
            log.exception("webhooks: delivery %s failed in the worker", leased.id)
        finally:
            self._in_hand -= 1
            self._room.set()

    async def _process(self, leased: Leased) -> None:
        try:
            delivery = Delivery.model_validate_json(leased.payload)
        except ValidationError as exc:
            why = f"not a delivery: {exc.error_count()} validation error(s)"
            await self.aq.retry(DELIVERIES, [leased], dead=True, reason=why)
            return
        # Renewed from now on, while the item waits for room and while it is attempted.
        held = self._held[leased.id] = _Held(leased)
        try:
            async with messaging.process(leased):
                await self._deliver(held, delivery)
        finally:
            self._held.pop(leased.id, None)

    async def _release(self, held: _Held) -> Leased:
        """The item's current version, once it is no longer renewed."""
        self._held.pop(held.leased.id, None)
        async with self._renewing:  # a renewal in progress gives the item a new version
            return held.leased

    async def _deliver(self, held: _Held, delivery: Delivery) -> None:
        endpoint = await self.cache.get(delivery.endpoint_id)
        if endpoint is None or endpoint.disabled:
            why = "deleted" if endpoint is None else f"disabled: {endpoint.disabled_reason}"
            dead = dead_item(delivery, f"endpoint {why}")
            await self.aq.transact(complete=[await self._release(held)], produce={DEAD: [dead]})
            self.counts["dead"] += 1
            webhook_metrics.attempted("dead", None)
            return
        gate = self.gates[endpoint.id]
        key = delivery.ordering_key if endpoint.ordered else None
        token = next(self._tokens)
        wait = await self._admit(endpoint, key, token)
        if wait is not None:
            when = self.aq.clock.now() + timedelta(seconds=wait)
            await self.aq.retry(DELIVERIES, [await self._release(held)], retry_at=when)
            self.counts["deferred"] += 1
            return
        hold = 0.0
        try:
            result = await self._sender.attempt(endpoint, delivery)
            decision = decide(self.settings, endpoint, delivery, result, self.aq.clock.now())
            if decision.pause:
                gate.block(time.monotonic() + decision.pause)
            if decision.delay is not None and key is not None:
                hold = decision.delay + 1.0
        finally:
            gate.done(token, time.monotonic(), key, hold)
            self._wake_one(endpoint.id)
        done = await self._release(held)
        await self.aq.commit(complete=[done], produce=decision.produce, silent=[ATTEMPTS])
        self.counts[decision.outcome.value] += 1
        webhook_metrics.attempted(decision.outcome.value, result.latency)
        if decision.disable is not None or decision.failing is not None:
            await self._mark(endpoint, decision)

    async def _admit(self, endpoint: Endpoint, key: str | None, token: int) -> float | None:
        """None once the attempt may start; else the seconds to defer the item by
        (it waited in the worker while room was expected soon: see gates)."""
        gate = self.gates[endpoint.id]
        waiters = self._waiters.setdefault(endpoint.id, deque())
        began = time.monotonic()
        first = True
        while True:
            now = time.monotonic()
            if first and waiters:  # others wait already: queue behind them, do not overtake
                wait: float | None = max(gate.expected_wait(endpoint, now, key), RECHECK)
            else:
                wait = gate.admit(endpoint, now, key, token)
            if wait is None:
                return None
            if not gate.may_wait(wait, now, began, first):
                log.debug(
                    "webhooks: deferring for %s: wait %.3fs after %.3fs, %d waiting, latency %.3fs",
                    endpoint.id,
                    wait,
                    now - began,
                    gate.waiting,
                    gate.latency,
                )
                return gate.deferring(endpoint, now, wait)
            first = False
            woken = anyio.Event()
            waiters.append(woken)
            gate.waiting += 1
            try:
                with anyio.move_on_after(min(wait, RECHECK)):
                    await woken.wait()
            finally:
                gate.waiting -= 1
                if not woken.is_set():
                    waiters.remove(woken)

    def _wake_one(self, endpoint_id: str) -> None:
        """An attempt to ``endpoint_id`` ended: the first item waiting for room looks again."""
        waiters = self._waiters.get(endpoint_id)
        if waiters:
            waiters.popleft().set()

    async def _mark(self, endpoint: Endpoint, decision: Decision) -> None:
        """Record on the endpoint that it started failing, recovered, or is disabled."""
        if endpoint.id in self._marking:
            return
        self._marking.add(endpoint.id)
        now = self.aq.clock.now()

        def edit(current: Endpoint) -> Endpoint | None:
            if decision.disable is not None and not current.disabled:
                log.warning("webhooks: disabling endpoint %s: %s", current.id, decision.disable)
                return current.model_copy(
                    update={"disabled": True, "disabled_reason": decision.disable}
                )
            if decision.failing and current.failing_since is None:
                return current.model_copy(update={"failing_since": now})
            if decision.failing is False and current.failing_since is not None:
                return current.model_copy(update={"failing_since": None})
            return None

        try:
            self.cache.put(await change(self.aq, endpoint.id, edit))
        except QueratorError as exc:
            log.warning("webhooks: could not update endpoint %s: %s", endpoint.id, exc)
        finally:
            self._marking.discard(endpoint.id)
        if decision.outcome is Outcome.DEAD and decision.disable:
            self.counts["disabled"] = self.counts.get("disabled", 0) + 1

    # -- leases ----------------------------------------------------------------
    async def _renew_forever(self) -> None:
        while True:
            await anyio.sleep(self._lease / 3)
            soon = self.aq.clock.now() + timedelta(seconds=self._lease * 2 / 3)
            due = [h for h in self._held.values() if h.leased.lease_deadline <= soon]
            async with self._renewing:
                # released meanwhile: their owners commit them now
                due = [h for h in due if self._held.get(h.leased.id) is h]
                for start in range(0, len(due), MAX_BATCH):
                    await self._renew(due[start : start + MAX_BATCH])

    async def _renew(self, due: list[_Held]) -> None:
        """Renew ``due`` in one call; one by one if that fails (a lost lease)."""
        try:
            renewed = await self.aq.renew(DELIVERIES, [h.leased for h in due])
        except QueratorError:
            if len(due) > 1:
                for held in due:
                    await self._renew([held])
            else:
                log.debug("webhooks: could not renew %s (lease lost?)", due[0].leased.id)
            return
        by_id = {leased.id: leased for leased in renewed}
        for held in due:
            held.leased = by_id.get(held.leased.id, held.leased)
