"""A parent's end and its running children: each child's parent-close policy
(:data:`~querator.workflows.stored.ParentClosePolicy`) applied in the
transaction that ends the parent.

A run that ends with a result (completed) has no running child: ``gather`` and
a child call wait for their children. A run that ends without one (cancelled,
failed, timed out) may: its ``cancel`` children get a cancel request and a wake
in the same transaction as the parent's end; ``abandon`` children run on; while
a ``wait`` child runs, the parent does not end yet: the child's end wakes the
parent, which then tries again.

A body may start children while another worker ends the parent (a cancel
request, a deadline): the commit that starts them then checks for a cancel
request or a passed deadline right after it, and cancels the ``cancel``
children itself (:func:`cancel_if_closing`), so a child never outlives a
cancelled parent because of the race.
"""

from __future__ import annotations

from datetime import datetime

from querator.queue.models import Item
from querator.queue.service import AsyncQueueClient
from querator.workflows.children import child_links, running_children
from querator.workflows.engine.child_requests import Child
from querator.workflows.keys import RESULTS_QUEUE, cancel_key, result_key
from querator.workflows.stored import (
    CancelRecord,
    ChildLink,
    RunMeta,
    RunRecord,
    record_item,
    wake_item,
)

__all__ = ["cancel_if_closing", "cancel_items", "closing"]

Produce = dict[str, list[Item]]


def cancel_items(links: list[ChildLink], reason: str, now: datetime) -> Produce:
    """Cancel requests and their wakes for the ``cancel`` children of ``links``."""
    produce: Produce = {}
    for link in links:
        if link.policy != "cancel":
            continue
        record = CancelRecord(reason=reason, requested_at=now)
        produce.setdefault(RESULTS_QUEUE, []).append(
            record_item(cancel_key(link.run_id), record, link.run_id)
        )
        wake = wake_item(link.run_id, "cancel", workflow=link.workflow)
        produce.setdefault(link.queue, []).append(wake)
    return produce


async def closing(aq: AsyncQueueClient, run_id: str, final: RunRecord) -> tuple[Produce, bool]:
    """What ending ``run_id`` with ``final`` does to its running children: the
    cancel requests to commit with the end, and whether a ``wait`` child still
    runs (the end must wait: it is not committed)."""
    if final.ok:
        return {}, False
    links = await child_links(aq, run_id)
    if not links:
        return {}, False
    running = await running_children(aq, links)
    reason = f"parent run {run_id} ended {final.final_status()}"
    produce = cancel_items(running, reason, aq.clock.now())
    return produce, any(link.policy == "wait" for link in running)


async def cancel_if_closing(
    aq: AsyncQueueClient, run_id: str, meta: RunMeta, children: list[Child]
) -> None:
    """After a commit of ``run_id`` started ``children``: cancel the ``cancel``
    ones if the run is being cancelled or is past its deadline, or has ended
    (its end may not have seen them)."""
    wanted = [c for c in children if c.policy == "cancel"]
    if not wanted:
        return
    now = aq.clock.now()
    past = meta.deadline is not None and now >= meta.deadline
    if not past:
        found = await aq.lookup(RESULTS_QUEUE, [cancel_key(run_id), result_key(run_id)])
        if not found:
            return
    links = [
        ChildLink(
            run_id=c.run_id,
            workflow=c.meta.workflow,
            queue=c.meta.queue,
            position=c.position,
            policy=c.policy,
        )
        for c in wanted
    ]
    await aq.transact(produce=cancel_items(links, f"parent run {run_id} is ending", now))
