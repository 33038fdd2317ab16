"""Carrying out a resume request (see :mod:`querator.workflows.rerun`): the
worker that leases the request's wake deletes what the resumed run must do
again, then replays the run as on any miss."""

from __future__ import annotations

import logging

from querator.queue.models import StoredItem
from querator.queue.service import AsyncQueueClient
from querator.workflows.engine.history import WINDOW
from querator.workflows.keys import (
    RESULTS_QUEUE,
    attempt_key,
    cancel_key,
    result_key,
    resume_key,
    step_key,
    wait_key,
)
from querator.workflows.stored import ResumeRecord, StepRecord

__all__ = ["apply_resume"]

log = logging.getLogger("querator.workflows")


async def apply_resume(aq: AsyncQueueClient, run_id: str) -> bool:
    """Carry out a stored resume request (a worker holding its wake does this):
    delete the run's result, cancel request and records (a call's outcome and
    what it waited for) from the request's position on, the request itself
    last. False when there was none."""
    heads = [resume_key(run_id), result_key(run_id), cancel_key(run_id)]
    found = await aq.lookup(RESULTS_QUEUE, heads)
    stored = found.get(heads[0])
    if stored is None:
        return False
    request = ResumeRecord.model_validate_json(stored.payload)
    doomed = [found[key].id for key in heads[1:] if key in found]
    start = request.position
    while start is not None:  # windows of step records, while they hold any
        window = range(start, start + WINDOW)
        keys = [step_key(run_id, p) for p in window] + [wait_key(run_id, p) for p in window]
        hits = await aq.lookup(RESULTS_QUEUE, keys)
        doomed += [hits[key].id for key in keys if key in hits]
        steps = [hits[key] for key in keys[: len(window)] if key in hits]
        doomed += await _attempt_records(aq, steps)
        start = start + WINDOW if hits else None
    for at in range(0, len(doomed), 1000):
        await aq.delete_items(RESULTS_QUEUE, doomed[at : at + 1000])
    await aq.delete_items(RESULTS_QUEUE, [stored.id])  # last: a crash before it redoes all
    log.info("run %s: resume carried out (%d record(s) removed)", run_id, len(doomed))
    return True


async def _attempt_records(aq: AsyncQueueClient, records: list[StoredItem]) -> list[str]:
    """The ids of the failed attempts' records of these step records (their
    attempts are numbered again when the step runs again)."""
    keys = [
        attempt_key(item.dedup_key or "", n)
        for item in records
        for n in range(1, StepRecord.model_validate_json(item.payload).attempts)
    ]
    ids: list[str] = []
    for at in range(0, len(keys), 1000):  # a lookup takes 1,000 keys
        found = await aq.lookup(RESULTS_QUEUE, keys[at : at + 1000])
        ids += [item.id for item in found.values()]
    return ids
