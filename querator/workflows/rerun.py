"""Running a failed run again: resume it in place, or fork it into a new run.

- :func:`resume` (``querator runs resume RUN_ID``): a failed or cancelled run
  goes on under the same id from its first failed step; the steps before it
  keep their stored results. It writes a resume request and a wake task in
  one transaction; the worker that leases the wake removes the run's result,
  cancel request and the records from the first failed step on (all or
  nothing, the request last), then replays the body as on any miss. A worker
  that dies in between leaves the wake to another, which finishes the job.
- :func:`fork` (``querator runs fork RUN_ID --from-step N``): a new run of the
  same workflow and arguments whose history is a copy of the old one's steps
  before position ``N``, started in one transaction.

Sagas are not resumed (their compensations have run; fork them instead).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import get_args

import anyio

from querator.errors import Conflict, InvalidArgument, RequestTimeout
from querator.queue.client import QueueClient
from querator.queue.models import Item, Ref
from querator.queue.service import AsyncQueueClient
from querator.telemetry.runs import starting
from querator.workflows.attributes import AttributesRecord, snapshot_key
from querator.workflows.children import child_links, running_children
from querator.workflows.engine.commit import transact_creating
from querator.workflows.engine.history import load_history
from querator.workflows.errors import RunNotFound
from querator.workflows.inspection import delete_present_async
from querator.workflows.keys import (
    RESULTS_QUEUE,
    RESUME_TAG,
    SET_ATTRIBUTES_STEP,
    cancel_key,
    child_run_id,
    meta_key,
    new_run_id,
    resume_key,
    step_key,
)
from querator.workflows.runs import AsyncRunHandle, RunHandle
from querator.workflows.stored import (
    ResumeRecord,
    RunMeta,
    RunStatus,
    StepRecord,
    attribute_items,
    index_items,
    record_item,
    start_items,
    wake_item,
)

__all__ = ["fork", "fork_async", "resume", "resume_async"]

log = logging.getLogger("querator.workflows")


async def resume_async(aq: AsyncQueueClient, run_id: str) -> bool:
    """Resume a failed or cancelled run (see the module doc); False when the run
    is running or completed. RunNotFound for an unknown run; InvalidArgument
    for a saga; RequestTimeout (nothing written) while a child its end is
    cancelling has not ended after :data:`CHILD_END_WAIT` seconds."""
    history = await load_history(aq, run_id)
    if history.meta is None:
        raise RunNotFound(run_id)
    finished = history.finished
    if finished is None or finished.ok:
        return False
    if finished.saga or history.compensating:
        raise InvalidArgument("run_id", f"run {run_id} is a saga: fork it instead")
    if await _await_closing_children(aq, run_id):
        history = await load_history(aq, run_id)  # with their ends' records
    meta = history.meta
    if meta is None:
        raise RunNotFound(run_id)  # purged meanwhile
    failed = [p for p, record in history.records.items() if not record.ok]
    await _resume_children(aq, run_id, failed)
    await _drop_stale_entries(aq, run_id, meta)
    request = ResumeRecord(position=min(failed) if failed else None, requested_at=aq.clock.now())
    produce = {
        RESULTS_QUEUE: [
            record_item(resume_key(run_id), request, run_id),
            *index_items(run_id, meta, "running"),
        ],
        meta.queue: [wake_item(run_id, RESUME_TAG, trace=meta.trace, workflow=meta.workflow)],
    }
    while True:
        ended = await _ended_entries(aq, run_id, meta)
        try:
            await transact_creating(aq, [], produce, delete=ended)
            break
        except Conflict as exc:  # a lister pruned one of them meanwhile: read again
            if not set(exc.reasons) <= {ref.id for ref in ended}:
                raise
    log.info("run %s resumed from position %s", run_id, request.position)
    return True


async def _ended_entries(aq: AsyncQueueClient, run_id: str, meta: RunMeta) -> list[Ref]:
    """The run's index entries of the statuses a run ends in (its ``failed`` or
    ``cancelled`` ones), which the resume deletes in its commit: the run's next
    end writes its entries as new items, so a lister that read an old one while
    the run was running and prunes it by that item's id can never delete them,
    even if it dies before writing the run's current entries again."""
    ended = [status for status in get_args(RunStatus) if status != "running"]
    keys = [item.dedup_key or "" for status in ended for item in index_items(run_id, meta, status)]
    found = await aq.lookup(RESULTS_QUEUE, keys)
    return [Ref(RESULTS_QUEUE, found[key].id, found[key].version) for key in keys if key in found]


async def _drop_stale_entries(aq: AsyncQueueClient, run_id: str, meta: RunMeta) -> None:
    """Delete the run's stale ``running`` index entries (left from before it ended)
    so that the resume writes new ones, as new items. A lister prunes an entry by
    the item id it read, so it can never delete the resumed run's live entry,
    even if it dies before writing the run's current entries again
    (:func:`~querator.workflows.inspection.prune_entries_async`). A lister that
    deleted one meanwhile is no matter; a crash before the resume commits
    leaves the run failed, which those entries did not list anyway."""
    keys = [item.dedup_key or "" for item in index_items(run_id, meta, "running")]
    found = await aq.lookup(RESULTS_QUEUE, keys)
    await delete_present_async(aq, [found[key].id for key in keys if key in found])


CHILD_END_WAIT = 10.0
"""Seconds a resume waits for the children its run's end is cancelling to end."""


async def _await_closing_children(aq: AsyncQueueClient, run_id: str) -> bool:
    """Wait until the children the run's end asked to cancel (parent-close policy
    ``cancel``) have ended, so that the resume sees their records and resumes
    them with their parent (a resume right after a cancel would otherwise
    replay the parent into its child's cancelled outcome). True when it waited
    for some; :class:`~querator.errors.RequestTimeout` (nothing written) when
    one is still running after :data:`CHILD_END_WAIT` seconds."""
    links = [link for link in await child_links(aq, run_id) if link.policy == "cancel"]
    waited = False
    deadline = anyio.current_time() + CHILD_END_WAIT
    while links:
        running = await running_children(aq, links)
        if not running:
            break
        found = await aq.lookup(RESULTS_QUEUE, [cancel_key(link.run_id) for link in running])
        links = [link for link in running if cancel_key(link.run_id) in found]
        if not links:
            break
        if anyio.current_time() >= deadline:
            raise RequestTimeout(
                f"run {run_id} not resumed: its child {links[0].run_id} is still ending "
                f"(cancelled by its parent's end {CHILD_END_WAIT:g} s ago or more); resume "
                "the run once its children have ended"
            )
        waited = True
        await anyio.sleep(0.05)
    return waited


async def _resume_children(aq: AsyncQueueClient, run_id: str, failed: list[int]) -> None:
    """Resume the child runs that failed at these positions of ``run_id`` (a child
    that is a saga is left as it ended: the parent takes its outcome again)."""
    children = {child_run_id(run_id, p) for p in failed}
    if not children:
        return
    found = await aq.lookup(RESULTS_QUEUE, [meta_key(c) for c in sorted(children)])
    for child in sorted(children):
        if meta_key(child) in found:
            with contextlib.suppress(InvalidArgument):
                await resume_async(aq, child)


async def fork_async(aq: AsyncQueueClient, run_id: str, from_step: int) -> AsyncRunHandle[object]:
    """A new run of ``run_id``'s workflow and arguments whose steps before
    position ``from_step`` keep the old run's results (0: start afresh)."""
    history = await load_history(aq, run_id)  # not from_step: it is checked below
    meta = history.meta
    if meta is None:
        raise RunNotFound(run_id)
    reached = max(history.records, default=-1) + 1
    if not 0 <= from_step <= reached:
        raise InvalidArgument("from_step", f"must be within 0 … {reached} for run {run_id}")
    new_id = new_run_id(None)
    with starting(meta.workflow, meta.queue) as started:
        copied = RunMeta(
            workflow=meta.workflow,
            args=meta.args,
            queue=meta.queue,
            started_at=aq.clock.now(),
            trace=started.carrier,
            priority=meta.priority,
            attributes=meta.attributes,
        )
        produce = start_items(new_id, copied)
        kept = [
            record_item(step_key(new_id, p), record, new_id)
            for p, record in sorted(history.records.items())
            if p < from_step
        ]
        kept += _kept_attributes(new_id, copied, history.records, from_step)
        produce[RESULTS_QUEUE] = [*produce[RESULTS_QUEUE], *kept]
        await transact_creating(aq, [], produce)
        started.created(new_id, meta.workflow, existing=False)
    log.info("run %s forked from position %d into run %s", run_id, from_step, new_id)
    return AsyncRunHandle(aq, new_id)


def _kept_attributes(
    run_id: str, meta: RunMeta, records: Mapping[int, StepRecord], before: int
) -> list[Item]:
    """A fork's search attributes as its kept history left them: the snapshot of
    the last ``set_attributes`` kept, and the entries of its values (the new
    run's replay of that call finds the snapshot its record holds)."""
    texts = [
        r.result
        for p, r in sorted(records.items())
        if p < before and r.step == SET_ATTRIBUTES_STEP and r.result is not None
    ]
    if not texts:
        return []
    snapshot = AttributesRecord.model_validate_json(texts[-1])
    key = snapshot_key(run_id, snapshot.gen)
    entries = attribute_items(run_id, meta.workflow, meta.started_at, snapshot, every=True)
    return [record_item(key, snapshot, run_id), *entries]


def resume(q: QueueClient, run_id: str) -> bool:
    """See :func:`resume_async`."""
    return q.call(resume_async, q.aio, run_id)


def fork(q: QueueClient, run_id: str, from_step: int) -> RunHandle[object]:
    """See :func:`fork_async`."""
    handle = q.call(fork_async, q.aio, run_id, from_step)
    return RunHandle(q, handle.run_id)
