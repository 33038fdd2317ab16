"""Who serves what: the registry of workers, and items that no live worker serves.

Every worker keeps one record in the results queue (``querator.results``, key
``pollers/{client id}``) holding the kinds it leases from each of its queues
(:class:`PollerRecord`). It holds that item leased while it runs, renewing the
lease every :data:`HEARTBEAT` seconds for :data:`POLLER_TTL`, and gives it back
(``retry``) when it stops (no queue of its own: the registry adds nothing to
the maintenance sweep). So, read from the store:

- a worker is **live** while its item's lease holds;
- a worker that stopped was last seen when it gave its item back
  (``available_at``), one that died when it last renewed (``lease_deadline``
  minus :data:`POLLER_TTL`).

Routing (:mod:`querator.workflows.engine.served`) means a worker leases only
the items it serves; an item that no live worker serves therefore waits in its
queue. :func:`unserved_reason` says so in words ("no worker serving step 'x'
on queue 'q' has polled for 3m"): run detail (``get_run``, ``runs show``),
``querator health`` and the workers' WARNING (once per name) use it.
Workers delete the entries of workers gone for :data:`POLLERS_KEPT` seconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from querator.errors import QueueNotFound
from querator.model_bases import StoredModel, View
from querator.queue.models import StoredItem
from querator.queue.service import AsyncQueueClient
from querator.tasks.layout import is_task
from querator.workflows.keys import RESULTS_QUEUE, is_step, is_wake, routed_name

__all__ = [
    "HEARTBEAT",
    "POLLERS_PREFIX",
    "POLLER_TTL",
    "Poller",
    "PollerRecord",
    "Unserved",
    "read_pollers",
    "served_by",
    "unserved_items",
    "unserved_reason",
]

POLLERS_PREFIX = "pollers/"
"""Key prefix of the registry's entries in the results queue (``pollers/{client id}``)."""
POLLER_KIND = "querator.poller"
POLLER_TTL = 60.0
"""Seconds a worker's registry entry stays live without a renewal."""
HEARTBEAT = 20.0
"""Seconds between the renewals of a worker's registry entry."""
POLLERS_KEPT = 7 * 86_400.0
"""Seconds the entry of a worker that stopped is kept (for "has polled for ...")."""
UNSERVED_GRACE = 30.0
"""Seconds an item may wait for a worker that serves it before ``health`` and
the workers' WARNING count it (a rolling deploy leaves such gaps)."""
_PAGE = 100
_INTERNAL = frozenset({RESULTS_QUEUE})


class PollerRecord(StoredModel):
    """A worker's registry entry: what it leases."""

    client_id: str
    started_at: datetime
    serves: dict[str, list[str]]
    """Queue -> the item kinds it leases from it."""


class Poller(View):
    """A worker as the registry tells it."""

    client_id: str
    serves: dict[str, list[str]]
    """Queue -> the item kinds it leases from it."""
    live: bool
    """Its entry's lease holds: it runs (and polls) now."""
    last_seen: datetime
    """Now-ish for a live worker; else when it stopped (or last renewed)."""
    item_id: str
    """The id of its entry."""
    started_at: datetime | None = None
    """When it started (None from an entry that does not say)."""


def _poller(item: StoredItem, now: datetime) -> Poller | None:
    try:
        record = PollerRecord.model_validate_json(item.payload)
    except ValueError:
        return None
    deadline = item.lease_deadline
    live = deadline is not None and deadline > now
    if live:
        seen = now
    elif deadline is not None:
        seen = deadline - timedelta(seconds=POLLER_TTL)
    else:
        seen = item.available_at
    return Poller(
        client_id=record.client_id,
        serves=record.serves,
        live=live,
        last_seen=seen,
        item_id=item.id,
        started_at=record.started_at,
    )


async def read_pollers(aq: AsyncQueueClient) -> list[Poller]:
    """Every worker the registry holds (live or not), by client id."""
    found: list[Poller] = []
    now = aq.clock.now()
    after: str | None = None
    while True:
        try:
            page = await aq.scan_keys(RESULTS_QUEUE, POLLERS_PREFIX, after=after, limit=_PAGE)
        except QueueNotFound:
            return found
        found += [p for p in (_poller(item, now) for item in page) if p is not None]
        if len(page) < _PAGE:
            return found
        after = page[-1].dedup_key


def served_by(pollers: Iterable[Poller], queue: str, kind: str) -> list[Poller]:
    """The workers that lease items of ``kind`` from ``queue``."""
    return [p for p in pollers if kind in p.serves.get(queue, ())]


def _what(kind: str) -> str:
    name = routed_name(kind)
    role = "workflow" if is_wake(kind) else "task" if is_task(kind) else "step"
    return f"{role} {name!r}" if name is not None else f"{kind!r} items"


def _ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7_200:
        return f"{seconds // 60}m"
    if seconds < 172_800:
        return f"{seconds // 3_600}h"
    return f"{seconds // 86_400}d"


def unserved_reason(pollers: Sequence[Poller], queue: str, kind: str, now: datetime) -> str | None:
    """Why an item of ``kind`` in ``queue`` is not leased: no live worker serves
    it (None when one does)."""
    serving = served_by(pollers, queue, kind)
    if any(p.live for p in serving):
        return None
    what = f"no worker serving {_what(kind)} on queue {queue!r}"
    if not serving:
        return f"{what} has polled (none registered)"
    last = max(p.last_seen for p in serving)
    return f"{what} has polled for {_ago((now - last).total_seconds())}"


class Unserved(View):
    """Items of one kind in one queue that wait for a worker serving them."""

    queue: str
    kind: str
    items: int
    """How many were seen (at most the probe's limit per partition)."""
    waiting_since: datetime
    """When the oldest of them became available."""
    reason: str
    """What :func:`unserved_reason` says."""


async def unserved_items(
    aq: AsyncQueueClient,
    queues: Iterable[str] | None = None,
    *,
    grace: float = UNSERVED_GRACE,
    limit: int = 1_000,
) -> list[Unserved]:
    """Ready items of workflow and step kinds that no live worker serves and that
    waited over ``grace`` seconds, per queue and kind. Reads the registry and
    the first ``limit`` items of each partition of ``queues`` (default: every
    queue but querator's records, its registry and the dead queues)."""
    pollers = await read_pollers(aq)
    now = aq.clock.now()
    due = now - timedelta(seconds=grace)
    names = list(queues) if queues is not None else await _work_queues(aq)
    found: list[Unserved] = []
    for queue in names:
        oldest: dict[str, tuple[int, datetime]] = {}
        for item in await _head(aq, queue, limit):
            routed = is_wake(item.kind) or is_step(item.kind) or is_task(item.kind)
            if not routed or item.available_at > due:
                continue
            count, since = oldest.get(item.kind, (0, item.available_at))
            oldest[item.kind] = (count + 1, min(since, item.available_at))
        for kind, (count, since) in sorted(oldest.items()):
            reason = unserved_reason(pollers, queue, kind, now)
            if reason is not None:
                found.append(
                    Unserved(
                        queue=queue, kind=kind, items=count, waiting_since=since, reason=reason
                    )
                )
    return found


async def _work_queues(aq: AsyncQueueClient) -> list[str]:
    """Every queue but querator's records, its registry and the dead queues."""
    names: list[str] = []
    dead: set[str] = set()
    pivot: str | None = None
    while True:
        page = [i for i in await aq.list_queues(pivot=pivot, limit=_PAGE) if i.name != pivot]
        if not page:
            return [n for n in names if n not in _INTERNAL and n not in dead]
        names += [info.name for info in page]
        dead.update(info.settings.dead_queue for info in page if info.settings.dead_queue)
        pivot = page[-1].name


async def _head(aq: AsyncQueueClient, queue: str, limit: int) -> list[StoredItem]:
    """The first ``limit`` items of each partition of ``queue`` (none if it is gone)."""
    try:
        partitions = (await aq.queue_info(queue)).settings.partitions
        items: list[StoredItem] = []
        for partition in range(partitions):
            items += await aq.list_items(queue, partition=partition, limit=limit)
        return items
    except QueueNotFound:
        return []
