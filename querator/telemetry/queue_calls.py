"""The telemetry of the queue service's calls: send and receive spans, counters
and lease-to-complete latencies of produce, lease and transact (measured by
the store where it records when each lease began, whoever leased the item;
else by this client, for the items it leased itself).

The queue service calls these only when something observes
(:func:`~querator.telemetry.switches.observing`); each wraps the service's own
store call, given as a function of the trace :data:`Carrier` the produced items
get.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from querator.telemetry import messaging, queue_metrics
from querator.telemetry.switches import metering

if TYPE_CHECKING:
    from querator.queue.backends.base import Leases
    from querator.queue.models import Item, Leased, Ref, TransactResult

Carrier = Callable[[str], Mapping[str, str] | None]
"""Per destination queue, the trace context its produced items get (or None)."""


def no_trace(queue: str) -> None:
    """The :data:`Carrier` of a call nobody observes: no trace context."""
    return None


class QueueCalls:
    """The telemetry of one client's queue calls (it keeps when each held item
    was leased, for the lease-to-complete latency)."""

    def __init__(self) -> None:
        self._lease_times = queue_metrics.LeaseClock()

    async def produce(
        self, queue: str, count: int, store: Callable[[Carrier], Awaitable[list[str]]]
    ) -> list[str]:
        """A produce of ``count`` items in its send span (its context in the items'
        headers), and its count."""
        with messaging.sending("produce", {queue: count}) as send:
            ids = await store(send.carrier)
            send.produced({queue: ids})
        if metering():
            queue_metrics.count([(queue, len(ids))], "produced")
        return ids

    def took(self, queue: str, client_id: str, leases: Leases, started_ns: int) -> list[Leased]:
        """The items of a lease that found some, once its telemetry is recorded."""
        items = leases.items
        messaging.received(queue, client_id, items, started_ns)
        if metering():
            queue_metrics.waited(queue, leases.waited)
            self._lease_times.leased((item.id for item in items), time.monotonic())
        return items

    async def transact(
        self,
        groups: Mapping[str, Sequence[Ref]],
        produce: Mapping[str, Sequence[Item]],
        claimed: Mapping[str, Sequence[Item]],
        store: Callable[[Carrier], Awaitable[TransactResult]],
    ) -> TransactResult:
        """A transaction with a send span per destination queue (their contexts in
        the produced items' headers) and its metrics."""
        batches = {name: len(items) for name, items in produce.items() if items}
        for name, items in claimed.items():
            batches[name] = batches.get(name, 0) + len(items)
        settled = {
            role: [(ref.queue, ref.id) for ref in groups[role]]
            for role in ("complete", "retry")
            if groups.get(role)
        }
        with messaging.settling(settled), messaging.sending("transact", batches) as send:
            result = await store(send.carrier)
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
            measured = result.held_for  # by the store: items leased by any client
            for queue, seconds in measured.items():
                queue_metrics.held(queue, seconds)
            self._lease_times.finished(
                ((r.queue, r.id) for r in completes if r.queue not in measured), now, done=True
            )
            self._lease_times.forget(r.id for r in completes if r.queue in measured)
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
