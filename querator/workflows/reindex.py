"""Index the runs a store holds without run-index entries (runs started by a
querator without the run index): ``querator runs reindex``.

It reads every ``{run}/meta`` record of the results queue (a scan, once) and
writes each run's entries for its current status (:mod:`querator.workflows.run_index`).
Entries are keyed, so running it again, or while workers run, writes nothing twice.
"""

from __future__ import annotations

from querator.errors import QueueNotFound
from querator.queue.client import QueueClient
from querator.queue.models import Item
from querator.queue.service import AsyncQueueClient
from querator.workflows.inspection import run_infos_async
from querator.workflows.keys import RECORD_KIND, RESULTS_QUEUE, meta_key
from querator.workflows.stored import RunMeta, index_items

__all__ = ["reindex_runs", "reindex_runs_async"]

PAGE = 250
"""Records read per page, and runs whose entries are written per transaction."""
META_SUFFIX = meta_key("")
"""What a meta record's key ends with (``{run}/meta``)."""


async def reindex_runs_async(aq: AsyncQueueClient) -> int:
    """Write the index entries of every stored run; returns how many runs were seen."""
    try:
        info = await aq.get_queue(RESULTS_QUEUE)
    except QueueNotFound:
        return 0  # no run was ever started in this store
    seen = 0
    for partition in range(info.settings.partitions):
        pivot: str | None = None
        while True:
            page = await aq.list_items(RESULTS_QUEUE, partition=partition, pivot=pivot, limit=PAGE)
            run_ids = [
                (item.dedup_key or "").removesuffix(META_SUFFIX)
                for item in page
                if item.id != pivot
                and item.kind == RECORD_KIND
                and (item.dedup_key or "").endswith(META_SUFFIX)
            ]
            seen += await _index(aq, run_ids)
            if len(page) < PAGE:
                break
            pivot = page[-1].id
    return seen


async def _index(aq: AsyncQueueClient, run_ids: list[str]) -> int:
    """Write the entries of these runs for their current status."""
    if not run_ids:
        return 0
    infos = await run_infos_async(aq, run_ids)
    items: list[Item] = []
    for run_id, run in infos.items():
        meta = RunMeta(
            workflow=run.workflow, args=run.args, queue=run.queue, started_at=run.started_at
        )
        status = run.status if run.finished_at is not None else "running"
        items += index_items(run_id, meta, status, new=True)
    for start in range(0, len(items), 1000):
        await aq.produce(RESULTS_QUEUE, items[start : start + 1000])
    return len(infos)


def reindex_runs(q: QueueClient) -> int:
    """See :func:`reindex_runs_async`."""
    return q.call(reindex_runs_async, q.aio)
