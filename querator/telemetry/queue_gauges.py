"""Per-queue gauges (depth, leased, scheduled, oldest age, dead letters) as
OpenTelemetry observable gauges.

An observable gauge is read by the SDK's collection, on the reader's thread,
synchronously; the store is read on the client's event loop. So each open
client keeps a :class:`GaugeSource`: a snapshot of its store's queues, which the
instruments' callbacks only read, and a refresh that runs on the client's loop
at most every :data:`REFRESH` seconds, and only after a collection asked for it.
With no SDK configured nothing collects, and no query is ever made.

Every read is bounded (:meth:`querator.queue.backends.base.Backend.gauges`):
no ``COUNT(*)`` over a big table; counts past :data:`LIMIT` items per
partition are the store's estimate.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Final, NamedTuple, Protocol

import anyio
from opentelemetry.metrics import CallbackOptions, Observation

from querator.errors import QueueNotFound
from querator.telemetry import meter
from querator.telemetry.queue_metrics import QUEUE

if TYPE_CHECKING:
    from querator.queue.models import QueueGauges, QueueInfo

LIMIT: Final = 10_000
"""Rows a probe of one partition reads at most; counts are exact below it."""
REFRESH: Final = 10.0
"""Seconds between two reads of the store by one client (when collected)."""
PAGE: Final = 500
"""Queues listed per page."""
DEAD_QUEUE: Final = "dead_queue"
"""The attribute naming the dead queue on the dead-letter gauge."""


class Store(Protocol):
    """What a source reads: the queue client's listing and gauges."""

    async def list_queues(self, pivot: str | None = None, limit: int = 100) -> list[QueueInfo]:
        """Queues in name order from ``pivot``."""

    async def gauges(self, queue: str, *, limit: int = LIMIT) -> QueueGauges:
        """The queue's bounded gauges."""


class Snapshot(NamedTuple):
    """The gauges of every queue of one store, read at one moment."""

    queues: dict[str, QueueGauges]
    dead_queues: dict[str, str]
    """Queue -> its dead queue, for the queues that have one."""


class GaugeSource:
    """The gauges of one client's store, for the observable instruments."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.snapshot = Snapshot({}, {})
        self.wanted = False
        """Set by a collection; the refresh loop reads the store when it is."""

    async def refresh(self) -> Snapshot:
        """Read every queue's gauges now (queues deleted meanwhile are skipped)."""
        queues: dict[str, QueueGauges] = {}
        dead: dict[str, str] = {}
        pivot: str | None = None
        while True:
            page = await self._store.list_queues(pivot, PAGE + 1)
            for info in page[:PAGE]:
                try:
                    queues[info.name] = await self._store.gauges(info.name, limit=LIMIT)
                except QueueNotFound:
                    continue
                if info.settings.dead_queue:
                    dead[info.name] = info.settings.dead_queue
            if len(page) <= PAGE:
                break
            pivot = page[PAGE].name
        self.snapshot = Snapshot(queues, dead)
        return self.snapshot

    async def serve(self, on_error: Callable[[Exception], None]) -> None:
        """Refresh every :data:`REFRESH` seconds while collections ask (a client's
        background task, cancelled when it closes)."""
        while True:
            await anyio.sleep(REFRESH)
            if not self.wanted:
                continue
            self.wanted = False
            try:
                await self.refresh()
            except Exception as exc:  # the store is down: keep the last snapshot
                on_error(exc)


_sources: weakref.WeakSet[GaugeSource] = weakref.WeakSet()


def register(source: GaugeSource) -> None:
    """Observe ``source`` (an open client's) from now on."""
    _sources.add(source)


def unregister(source: GaugeSource) -> None:
    """Stop observing ``source`` (its client closed)."""
    _sources.discard(source)


def _snapshots() -> list[Snapshot]:
    found = []
    for source in list(_sources):
        source.wanted = True
        found.append(source.snapshot)
    return found


def _observe(
    read: Callable[[Snapshot], Iterable[Observation]],
) -> Callable[..., Sequence[Observation]]:
    def callback(options: CallbackOptions) -> Sequence[Observation]:
        return [found for snapshot in _snapshots() for found in read(snapshot)]

    return callback


def _each(value: Callable[[QueueGauges], float]) -> Callable[[Snapshot], Iterable[Observation]]:
    def read(snapshot: Snapshot) -> Iterable[Observation]:
        for name, gauges in snapshot.queues.items():
            yield Observation(value(gauges), {QUEUE: name})

    return read


def _dead_letters(snapshot: Snapshot) -> Iterable[Observation]:
    for name, dead in snapshot.dead_queues.items():
        found = snapshot.queues.get(dead)
        if found is not None:
            yield Observation(found.depth, {QUEUE: name, DEAD_QUEUE: dead})


_meter = meter()
GAUGES: Final = (
    _meter.create_observable_gauge(
        "querator.queue.depth",
        [_observe(_each(lambda g: g.depth))],
        unit="{item}",
        description="Items in the queue (exact below 10,000 per partition, then estimated).",
    ),
    _meter.create_observable_gauge(
        "querator.queue.leased",
        [_observe(_each(lambda g: g.leased))],
        unit="{item}",
        description="Items under a live lease.",
    ),
    _meter.create_observable_gauge(
        "querator.queue.scheduled",
        [_observe(_each(lambda g: g.scheduled))],
        unit="{item}",
        description="Items not leased and not yet due.",
    ),
    _meter.create_observable_gauge(
        "querator.queue.oldest_age",
        [_observe(_each(lambda g: g.oldest_age or 0.0))],
        unit="s",
        description="Seconds the first leasable item has waited since it became available.",
    ),
    _meter.create_observable_gauge(
        "querator.queue.dead_letter.depth",
        [_observe(_dead_letters)],
        unit="{item}",
        description="Items in the queue's dead queue.",
    ),
)
"""The observable gauges (kept referenced for the life of the process)."""
