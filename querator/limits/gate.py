"""Enforcing a :class:`~querator.limits.concurrency.Concurrency` on queue items
(steps), in the store, across every worker.

- An item that may start *takes* a permit of its key's semaphore: the permit
  handed to it by the holder before it (named in its ``querator-permit``
  header), or a free one.
- An item that finds no permit is *parked*: its worker completes it and writes
  (a) a *parked record* in ``querator.limitpark.<semaphore>`` holding the item
  to run, in arrival order, and (b) a *fallback copy* of the item, due
  :func:`fallback_delay` later (what runs it if every holder died). It holds no
  worker slot and no thread while parked.
- A holder that ends *hands its permit over*: it takes the oldest parked
  record and produces its item, due now, naming the permit (still leased) in
  its header, in one transaction; with nobody parked, the permit is freed.
  The woken item renews the permit by that name and version: waiters of one key
  start in arrival order and a newcomer cannot take the permit between them.

The caller (the workflow engine) writes the completion and the fallback copy;
this module reads and writes permits and parked records only.
"""

from __future__ import annotations

import base64
import contextlib
import json
from dataclasses import dataclass

from querator.errors import Conflict, QueratorError, QueueNotFound, RequestTimeout
from querator.limits.concurrency import Concurrency
from querator.locks import store
from querator.locks.names import queue_of
from querator.queue.models import Item, Leased, QueueSettings, Ref
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import MAX_DURATION

PARK_PREFIX = "querator.limitpark."
"""The parked records of semaphore ``s`` are items of ``PARK_PREFIX + s``."""
PERMIT_HEADER = "querator-permit"
"""The header naming a permit handed over: ``<semaphore> <item id> <version>``."""
PARKED_KIND = "querator.parked"
"""The ``kind`` of parked records."""
RECHECK = 5
"""A parked item's first fallback copy is due this many permit leases later;
each time it parks again, twice as late (up to :data:`MAX_BACKOFF` times)."""
MAX_BACKOFF = 64
"""The most a fallback copy's delay grows (a call parked seven times or more)."""


def fallback_delay(lease: float, parked_before: int) -> float:
    """Seconds until the fallback copy of an item parked ``parked_before`` times
    already is due (growing, so long waits cost few rechecks)."""
    return RECHECK * lease * min(1 << max(0, min(parked_before, 6)), MAX_BACKOFF)


RECORD_LEASE = 30.0
"""Seconds a parked record taken by a holder that died stays taken."""


@dataclass(slots=True)
class Permit:
    """A permit held for one item."""

    semaphore: str
    leased: Leased


def park_queue(semaphore: str) -> str:
    """The queue of ``semaphore``'s parked records."""
    return PARK_PREFIX + semaphore


class Gate:
    """Takes, parks and hands over permits for one worker (``client_id``)."""

    def __init__(self, aq: AsyncQueueClient, client_id: str) -> None:
        self.aq = aq
        self.client_id = client_id
        self._made: set[str] = set()

    async def ensure(self, semaphore: str, spec: Concurrency) -> None:
        """Create ``semaphore`` and its park queue (once per process)."""
        if semaphore in self._made:
            return
        await store.ensure(self.aq, semaphore, spec.limit, spec.lease)
        settings = QueueSettings(
            lease_timeout=RECORD_LEASE,
            expire_timeout=MAX_DURATION,
            max_attempts=0,
            dead_queue=None,
            reference="parked items",
        )
        await self.aq.create_queue(park_queue(semaphore), settings, exist_ok=True)
        self._made.add(semaphore)

    async def take(self, semaphore: str, item: Leased, record_key: str | None) -> Permit | None:
        """The permit handed to ``item`` if it is still good, else a free one, else
        None. ``record_key``: the parked record ``item`` may have left (a fallback
        copy that takes a free permit removes it: nobody must wake it again)."""
        handed = item.headers.get(PERMIT_HEADER, "").split(" ")
        if len(handed) == 3 and handed[0] == semaphore and handed[2].isdigit():
            ref = Ref(queue_of(semaphore), handed[1], int(handed[2]))
            with contextlib.suppress(Conflict, QueueNotFound):
                [renewed] = await self.aq.renew(ref.queue, [ref])
                return Permit(semaphore, renewed)
        leased = await store.try_lease(self.aq, semaphore, self.client_id)
        if leased is None:
            return None
        if record_key is not None:
            queue = park_queue(semaphore)
            with contextlib.suppress(QueratorError):
                found = await self.aq.lookup(queue, [record_key])
                if found:
                    await self.aq.delete_items(queue, [found[record_key].id])
        return Permit(semaphore, leased)

    async def park(
        self, semaphore: str, target: str, item: Item, fallback_id: str, record_key: str
    ) -> None:
        """Record ``item`` (for queue ``target``) as waiting for ``semaphore``, after
        the items parked before it; ``fallback_id``: its fallback copy. A record
        of the same ``record_key`` already parked keeps its place. Then hands a permit
        that is free (its holder died, or freed it just before this record) to
        the oldest record."""
        body = {
            "queue": target,
            "fallback": fallback_id,
            "payload": base64.b64encode(item.payload).decode(),
            "kind": item.kind,
            "encoding": item.encoding,
            "reference": item.reference,
            "dedup_key": item.dedup_key,
            "headers": {k: v for k, v in item.headers.items() if k != PERMIT_HEADER},
        }
        record = Item(
            kind=PARKED_KIND,
            payload=json.dumps(body).encode(),
            encoding="json",
            dedup_key=record_key,
        )
        await self.aq.commit(
            produce={park_queue(semaphore): [record]}, silent=[park_queue(semaphore)]
        )
        leased = await store.try_lease(self.aq, semaphore, self.client_id)
        if leased is not None:
            await self.release(Permit(semaphore, leased))

    async def release(self, permit: Permit) -> None:
        """Hand ``permit`` to the oldest parked item of its semaphore, or free it."""
        queue = park_queue(permit.semaphore)
        held = Ref(permit.leased.queue, permit.leased.id, permit.leased.version)
        while True:
            try:
                [record] = await self.aq.lease(queue, client_id=self.client_id)
            except (RequestTimeout, QueueNotFound):
                record = None
            if record is None:
                with contextlib.suppress(Conflict, QueueNotFound):
                    await self.aq.commit(retry=[held], silent=[held.queue], durable=False)
                return
            body = json.loads(record.payload)
            header = f"{permit.semaphore} {held.id} {held.version}"
            woken = Item(
                payload=base64.b64decode(body["payload"]),
                kind=body["kind"],
                encoding=body["encoding"],
                reference=body["reference"],
                dedup_key=f"{body['dedup_key']}/h{held.version}" if body["dedup_key"] else None,
                headers={**body["headers"], PERMIT_HEADER: header},
            )
            try:
                await self.aq.commit(
                    complete=[record], depends=[held], produce={body["queue"]: [woken]}
                )
            except Conflict as exc:
                if held.id in exc.reasons:
                    return  # the permit was lost meanwhile; the record comes back
                continue
            except QueueNotFound:
                with contextlib.suppress(Conflict, QueueNotFound):
                    await self.aq.complete(queue, [record])
                continue
            with contextlib.suppress(QueratorError):
                await self.aq.delete_items(body["queue"], [body["fallback"]])
            return
