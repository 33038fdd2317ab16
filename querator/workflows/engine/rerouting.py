"""Items written before routing: handed on under the kind that routes them.

Wake tasks and step items written by querator before routing have bare kinds
(``querator.wake``, ``querator.step``): every worker of their queue leases
them. A worker that serves the item's workflow or step handles it; one that
does not never fails it: it completes the item and produces the same item
under its routed kind (:func:`querator.workflows.keys.wake_kind`,
:func:`~querator.workflows.keys.step_kind`) in one transaction, so only the
workers that serve it lease it from then on. This is the compatibility path
for runs in flight across the upgrade; it needs no migration.
"""

from __future__ import annotations

import logging

from querator.errors import Conflict
from querator.queue.models import Item, Leased
from querator.queue.service import AsyncQueueClient
from querator.workflows.engine.commit import not_colliding, transact_creating
from querator.workflows.errors import WorkflowError

__all__ = ["NotServed", "reroute"]

log = logging.getLogger("querator.worker")


class NotServed(WorkflowError):
    """The item names a workflow or step this worker does not serve; ``kind``
    is the kind that routes it to the workers that do."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


async def reroute(aq: AsyncQueueClient, leased: Leased, error: NotServed) -> None:
    """Hand ``leased`` on under ``error.kind``: completed here, produced again (now,
    same payload, headers and run) for the workers that serve it."""
    if leased.kind == error.kind:  # routed already: cannot happen unless names changed
        log.error("item %s (%s): %s; released", leased.id, leased.kind, error)
        await aq.retry(leased.queue, [leased])
        return
    again = Item(
        payload=leased.payload,
        kind=error.kind,
        encoding=leased.encoding,
        reference=leased.reference,
        headers=dict(leased.headers),
        dedup_key=leased.dedup_key,
        priority=leased.priority,
    )
    try:
        await transact_creating(aq, [leased], not_colliding(leased, {leased.queue: [again]}))
    except Conflict as exc:
        log.warning("item %s: lease lost before it was handed on: %s", leased.id, exc)
        return
    log.info(
        "item %s of run %s (%s) handed on as %s",
        leased.id,
        leased.reference,
        leased.kind,
        error.kind,
    )
