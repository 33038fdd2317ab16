"""A run's child runs, as its links list them (``{run}/child/{position}``, written
with the commit that starts each child): read for ``get_run`` and for the
parent's end, which applies each child's :data:`~querator.workflows.stored.ParentClosePolicy`."""

from __future__ import annotations

from querator.errors import QueueNotFound
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import MAX_BATCH
from querator.workflows.keys import RESULTS_QUEUE, children_prefix, result_key
from querator.workflows.stored import ChildLink

__all__ = ["child_links", "running_children"]


async def child_links(aq: AsyncQueueClient, run_id: str) -> list[ChildLink]:
    """The links to the child runs ``run_id`` started, in position order (one
    indexed scan per 1,000)."""
    links: list[ChildLink] = []
    after: str | None = None
    while True:
        try:
            page = await aq.scan_keys(
                RESULTS_QUEUE, children_prefix(run_id), after=after, limit=MAX_BATCH
            )
        except QueueNotFound:
            return links
        links += [ChildLink.model_validate_json(item.payload) for item in page]
        if len(page) < MAX_BATCH:
            return links
        after = page[-1].dedup_key


async def running_children(aq: AsyncQueueClient, links: list[ChildLink]) -> list[ChildLink]:
    """Those of ``links`` whose child has no result yet (one lookup per 1,000)."""
    running: list[ChildLink] = []
    for start in range(0, len(links), MAX_BATCH):
        chunk = links[start : start + MAX_BATCH]
        found = await aq.lookup(RESULTS_QUEUE, [result_key(link.run_id) for link in chunk])
        running += [link for link in chunk if result_key(link.run_id) not in found]
    return running
