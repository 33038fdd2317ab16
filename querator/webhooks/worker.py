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

import contextlib
import itertools
import logging
import os
import secrets
import socket
import time
from collections import deque
from collections.abc import Mapping
from datetime import timedelta
from functools import partial
from typing import Any, TypedDict

import anyio
from anyio.abc import TaskGroup
from pydantic import ValidationError
from typing_extensions import Unpack

from querator.errors import Conflict, QueratorError, Unavailable
from querator.queue.harness import Kept, LeaseWorker
from querator.queue.models import Leased
from querator.queue.options import check_options
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import check_count, check_duration
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

__all__ = [
    "DEFAULT_SHUTDOWN_GRACE",
    "AsyncDeliveryWorker",
    "DeliveryWorkerOptions",
    "check_delivery_options",
]

log = logging.getLogger("querator.webhooks")

DEFAULT_SHUTDOWN_GRACE = 20.0


class DeliveryWorkerOptions(TypedDict, total=False):
    """How a delivery worker runs, shared by :class:`AsyncDeliveryWorker`,
    ``DeliveryWorker`` and ``querator webhooks worker`` (defaults:
    :func:`check_delivery_options`)."""

    concurrency: int
    """Deliveries in hand at once: attempts running plus items being looked at
    (default 200)."""
    client_id: str | None
    """Lease owner name (default ``webhooks-<host>-<pid>-<random>``)."""
    batch_size: int
    """Most deliveries leased by one call (default 100)."""
    poll_timeout: float
    """Longest wait of one lease call, in seconds (default 5)."""
    shutdown_grace: float
    """Seconds attempts in flight may finish after ``stop()`` (default 20)."""
    endpoint_ttl: float
    """Seconds the worker's copy of an endpoint may be old (default 2)."""


def check_delivery_options(options: Mapping[str, Any]) -> DeliveryWorkerOptions:
    """The options with their defaults, checked (InvalidArgument naming the first
    bad one, unknown names included); every option is set in the result."""
    check_options("DeliveryWorker", options, DeliveryWorkerOptions)
    return {
        "concurrency": check_count("concurrency", options.get("concurrency", 200), 1, 100_000),
        "client_id": options.get("client_id"),
        "batch_size": check_count("batch_size", options.get("batch_size", 100), 1, 1_000),
        "poll_timeout": check_duration("poll_timeout", options.get("poll_timeout", 5.0)),
        "shutdown_grace": check_duration(
            "shutdown_grace", options.get("shutdown_grace", DEFAULT_SHUTDOWN_GRACE), allow_zero=True
        ),
        "endpoint_ttl": check_duration("endpoint_ttl", options.get("endpoint_ttl", 2.0)),
    }


class AsyncDeliveryWorker(LeaseWorker):
    """Delivers webhooks until :meth:`stop` (see the module doc).

    ``concurrency`` bounds the deliveries in hand (attempts running plus
    items being looked at); ``endpoint_ttl`` is how old the worker's copy of
    an endpoint may be (options: :class:`DeliveryWorkerOptions`). It rides
    a store outage like the workflow worker (capped backoff, logged once per
    outage). On :meth:`stop` it stops leasing and lets the attempts in
    flight finish for up to ``shutdown_grace`` seconds (a second
    :meth:`stop` cuts that short); those still running then are given back
    to the queue at once.
    """

    def __init__(
        self,
        aq: AsyncQueueClient,
        settings: WebhookSettings | None = None,
        **options: Unpack[DeliveryWorkerOptions],
    ) -> None:
        checked = check_delivery_options(options)
        client_id = checked["client_id"]
        if client_id is None:
            client_id = f"webhooks-{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
        super().__init__(
            aq,
            log,
            f"webhooks: worker {client_id}",
            concurrency=checked["concurrency"],
            shutdown_grace=checked["shutdown_grace"],
            renewing="delivery",
        )
        self.client_id = client_id
        self.settings = settings or WebhookSettings()
        self.batch_size = checked["batch_size"]
        self.poll_timeout = checked["poll_timeout"]
        self.cache = EndpointCache(aq, checked["endpoint_ttl"])
        self.gates = Gates()
        self.counts: dict[str, int] = {"delivered": 0, "retrying": 0, "dead": 0, "deferred": 0}
        """Since this worker started: attempts by outcome, and deferrals."""
        self._sender = Sender(self.settings)
        self._held: dict[str, Kept] = {}
        """Deliveries in hand (waiting for room, or attempted), their leases kept alive."""
        self._marking: set[str] = set()
        self._waiters: dict[str, deque[anyio.Event]] = {}
        """Endpoint id -> items waiting for room there, first come first woken."""
        self._tokens = itertools.count()
        self._lease = self.settings.lease_timeout
        """The deliveries queue's lease_timeout (read from the queue when running)."""

    # -- lifecycle (the harness's hooks) ---------------------------------------
    async def arun(self) -> None:
        """Deliver until :meth:`stop`, then shut down gracefully."""
        await self._serve()
        log.info("webhooks: worker %s stopped (%s)", self.client_id, self.counts)

    async def _start(self) -> None:
        await ensure_queues(self.aq, self.settings)
        self._lease = (await self.aq.get_queue(DELIVERIES)).settings.lease_timeout
        log.info("webhooks: worker %s delivering", self.client_id)

    def _keep(self, group: TaskGroup) -> None:
        group.start_soon(self.cache.refresh_forever)

    def _poll(self, group: TaskGroup, items: TaskGroup) -> None:
        async def lease(want: int) -> list[Leased]:
            return await self.aq.lease(
                DELIVERIES, client_id=self.client_id, batch_size=want, timeout=self.poll_timeout
            )

        group.start_soon(partial(self._lease_loop, most=self.batch_size), DELIVERIES, items, lease)

    async def _release_held(self) -> None:
        if not self._held:
            return
        log.info("webhooks: giving back %d delivery(ies) still in flight", len(self._held))
        leases = [await self.renewer.release(kept) for kept in list(self._held.values())]
        try:
            try:
                await self.aq.retry(DELIVERIES, leases)
            except Conflict:  # one ended meanwhile: give back the others one by one
                for leased in leases:
                    with contextlib.suppress(Conflict):
                        await self.aq.retry(DELIVERIES, [leased])
        except QueratorError as exc:
            log.warning("webhooks: could not give deliveries back (they expire): %s", exc)

    async def _closed(self) -> None:
        await self._sender.close()

    async def _handle(self, leased: Leased) -> None:
        try:
            await self._process(leased)
        except Conflict:
            log.debug("webhooks: lost the lease of %s (another worker has it)", leased.id)
        except Unavailable as exc:
            log.warning("webhooks: store unavailable, %s will be retried: %s", leased.id, exc)
        except Exception:
            log.exception("webhooks: delivery %s failed in the worker", leased.id)

    async def _process(self, leased: Leased) -> None:
        try:
            delivery = Delivery.model_validate_json(leased.payload)
        except ValidationError as exc:
            why = f"not a delivery: {exc.error_count()} validation error(s)"
            await self.aq.retry(DELIVERIES, [leased], dead=True, reason=why)
            return
        # Renewed from now on, while the item waits for room and while it is attempted.
        held = self.renewer.keep(leased, self._lease, self._lease / 3)
        self._held[leased.id] = held
        try:
            async with messaging.process(leased):
                await self._deliver(held, delivery)
        finally:
            self._held.pop(leased.id, None)
            self.renewer.discard(held)

    async def _release(self, held: Kept) -> Leased:
        """The item's current version, once it is no longer renewed."""
        self._held.pop(held.current.id, None)
        return await self.renewer.release(held)  # after a renewal in flight

    async def _deliver(self, held: Kept, delivery: Delivery) -> None:
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
