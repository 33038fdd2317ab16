"""Committing a run's progress: one transaction that completes the item in hand
and produces what comes next, and the step item a worker may hand itself."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TypeVar, cast

import anyio

from querator.errors import Conflict, QueueNotFound, Unavailable
from querator.queue.models import Item, Leased, Ref, TransactResult
from querator.queue.outage import Backoff, Outage
from querator.queue.service import AsyncQueueClient
from querator.telemetry import workflow_metrics
from querator.telemetry.runs import RUN_ID, starting
from querator.workflows.engine.context import Child, Gather, starts_runs
from querator.workflows.engine.parent_close import closing
from querator.workflows.engine.successor import successor_items
from querator.workflows.keys import (
    DEAD_QUEUE,
    DEAD_SETTINGS,
    EVENTS_QUEUE,
    EVENTS_SETTINGS,
    RESULTS_QUEUE,
    RESULTS_SETTINGS,
    WORK_SETTINGS,
    awaited_record,
    is_step,
    result_key,
    step_key,
)
from querator.workflows.stored import (
    RunMeta,
    RunRecord,
    StepPayload,
    StepRecord,
    index_items,
    record_item,
    wake_item,
)

__all__ = [
    "Claim",
    "Produce",
    "child_started",
    "commit_final",
    "commit_held",
    "commit_wake",
    "ensure_work_queue",
    "final_items",
    "log_final",
    "merge_items",
    "not_colliding",
    "parent_items",
    "split_claim",
    "transact_creating",
]

R = TypeVar("R")

log = logging.getLogger("querator.workflows")

Produce = dict[str, list[Item]]


@dataclass(frozen=True)
class Claim:
    """The step item a commit produces leased to this worker, to run next."""

    queue: str
    item: Item
    payload: StepPayload


def split_claim(
    produce: Produce,
    payloads: Mapping[str, StepPayload],
    can_run: Callable[[str, str], bool],
) -> tuple[Produce, Claim | None]:
    """Take the step item to run next out of ``produce``, when there is exactly one
    (a fan-out goes to the queue: other workers run its members in parallel),
    it is due now, and ``can_run(step, queue)`` says this worker runs it.
    ``payloads``: the step items' payloads by dedup key."""
    steps = [(queue, item) for queue, items in produce.items() for item in items]
    steps = [(queue, item) for queue, item in steps if is_step(item.kind)]
    if len(steps) != 1:
        return produce, None
    queue, item = steps[0]
    payload = payloads.get(item.dedup_key or "")
    if payload is None or item.enqueue_at is not None or not can_run(payload.step, queue):
        return produce, None
    rest = {name: [i for i in items if i is not item] for name, items in produce.items()}
    return {name: items for name, items in rest.items() if items}, Claim(queue, item, payload)


def final_items(run_id: str, meta: RunMeta, final: RunRecord) -> Produce:
    """The run's result record, and for a child run its parent's record and wake
    (a run that continues as new starts its successor instead, which reports to
    the parent in its place)."""
    produce = {RESULTS_QUEUE: [record_item(result_key(run_id), final, run_id)]}
    produce[RESULTS_QUEUE] += index_items(run_id, meta, final.final_status())
    if final.continued_as is not None:
        return merge_items(produce, successor_items(run_id, meta, final))
    return merge_items(produce, parent_items(meta, final))


def parent_items(meta: RunMeta, final: RunRecord) -> Produce:
    """For a child run that ended with ``final``: its parent's record of it and the
    parent's wake (nothing for a run without a parent). Produced again when a wake
    finds the child ended, so a parent whose record was removed (a resume) gets it
    back instead of waiting for an end that already happened."""
    parent = meta.parent
    if parent is None:
        return {}
    record = StepRecord(
        step=meta.workflow, ok=final.ok, result=final.result, error=final.error, attempts=1
    )
    key = step_key(parent.run_id, parent.position)
    return {
        RESULTS_QUEUE: [record_item(key, record, parent.run_id)],
        parent.queue: [
            wake_item(
                parent.run_id, str(parent.position), trace=meta.trace, workflow=parent.workflow
            )
        ],
    }


@contextmanager
def child_started(parent_trace: Mapping[str, str], request: R) -> Iterator[R]:
    """For a :class:`Child` request (or a gather starting children): a ``start``
    span per child (a child of the parent run's trace context ``parent_trace``),
    open while the request is committed, and the request with each child's meta
    carrying its span's context (the child's spans nest under it). Other
    requests pass through."""
    if isinstance(request, Child):
        with _child_span(parent_trace, request) as child:
            yield cast(R, child)
    elif isinstance(request, Gather) and starts_runs(request):
        with ExitStack() as stack:
            members = tuple(
                stack.enter_context(_child_span(parent_trace, m)) if isinstance(m, Child) else m
                for m in request.members
            )
            yield cast(R, replace(request, members=members))
    else:
        yield request


@contextmanager
def _child_span(parent_trace: Mapping[str, str], child: Child) -> Iterator[Child]:
    meta = child.meta
    with starting(meta.workflow, meta.queue, parent=parent_trace) as started:
        if started.span.is_recording():
            started.span.set_attribute(RUN_ID, child.run_id)
        if started.carrier:
            meta = meta.model_copy(update={"trace": started.carrier})
        yield replace(child, meta=meta)


def log_final(run_id: str, final: RunRecord) -> None:
    """One line for a run's end."""
    status = final.final_status()
    if final.continued_as is not None:
        log.info("run %s continued as new: %s", run_id, final.continued_as)
    elif final.ok:
        log.info("run %s %s", run_id, status)
    else:
        error = final.error
        reason = f"{error.type}: {error.message}" if error else "no error stored"
        log.warning("run %s %s: %s", run_id, status, reason)


async def commit_final(
    aq: AsyncQueueClient,
    held: Leased,
    produce: Produce,
    run_id: str,
    meta: RunMeta,
    final: RunRecord,
) -> bool:
    """End the run with ``final``: its final items (and ``produce``) committed
    with ``held`` completed, its running children closed by their policies
    (:mod:`.parent_close`); logged, and counted once committed. While a child
    with the ``wait`` policy runs, the run does not end yet: ``held`` is
    completed with ``produce`` only, and that child's end wakes the run.
    True when the run ended (committed)."""
    closed, wait = await closing(aq, run_id, final)
    if wait:
        log.info("run %s ends once its children with parent_close_policy 'wait' end", run_id)
        await commit_held(aq, held, merge_items(produce, closed))
        return False
    log_final(run_id, final)
    ended = merge_items(produce, closed, final_items(run_id, meta, final))
    if not await commit_held(aq, held, ended):
        return False
    workflow_metrics.run_ended(meta.workflow, final.final_status())
    return True


def not_colliding(held: Leased, produce: Produce) -> Produce:
    """Rename a produced item holding the dedup key of the item being completed.

    Completing an item and producing its key in one transaction would dedup the
    new item into the one being deleted; ``{key}/r`` (and back) keeps both apart.
    """
    key = held.dedup_key
    if key is None or held.queue not in produce:
        return produce
    other = key[: -len("/r")] if key.endswith("/r") else key + "/r"
    items = [
        item.model_copy(update={"dedup_key": other}) if item.dedup_key == key else item
        for item in produce[held.queue]
    ]
    return {**produce, held.queue: items}


def merge_items(*parts: Produce) -> Produce:
    """The items of ``parts`` together, per queue, in order."""
    merged: Produce = {}
    for part in parts:
        for queue, items in part.items():
            merged.setdefault(queue, []).extend(items)
    return merged


async def transact_creating(
    aq: AsyncQueueClient,
    complete: list[Leased],
    produce: Produce,
    produce_leased: Produce | None = None,
    client_id: str | None = None,
    lookup: dict[str, list[str]] | None = None,
    delete: list[Ref] | None = None,
    wake: Collection[str] = (),
) -> TransactResult:
    """Complete and produce at once (and ``delete`` those item versions), creating
    missing target queues first (``lookup``, ``wake``: see
    :meth:`AsyncQueueClient.commit`).

    Step records nobody waits for do not wake the results queue's watchers
    (``result()`` calls): only a run's end and a saga's compensation do.

    A commit that fails with :class:`~querator.errors.Unavailable` (the store
    restarting, a connection cut) is tried again with capped backoff for as
    long as the items it completes stay leased: it names their versions, so a
    repeat can never apply twice or clobber another worker's item. If the
    first attempt did commit and only its answer was lost, the repeat finds the
    items gone (Conflict) and the worker drops what it held in memory.
    """
    targets = set(produce) | set(produce_leased or {}) | set(lookup or {})
    records = produce.get(RESULTS_QUEUE, [])
    quiet = records and not any(
        item.dedup_key is None or awaited_record(item.dedup_key) for item in records
    )
    silent = (RESULTS_QUEUE,) if quiet else ()
    attempts = len(targets) + 1
    backoff: Backoff | None = None
    attempt = 0
    while True:
        try:
            result = await aq.commit(
                complete=complete,
                produce=produce,
                produce_leased=produce_leased,
                client_id=client_id,
                lookup=lookup,
                silent=silent,
                delete=delete or [],
                wake=wake,
            )
        except QueueNotFound as exc:
            attempt += 1
            if exc.queue not in targets or attempt > attempts:
                raise
            if exc.queue == RESULTS_QUEUE:
                await aq.create_queue(RESULTS_QUEUE, RESULTS_SETTINGS, exist_ok=True)
            elif exc.queue == EVENTS_QUEUE:
                await aq.create_queue(EVENTS_QUEUE, EVENTS_SETTINGS, exist_ok=True)
            else:
                await ensure_work_queue(aq, exc.queue)
            continue
        except Unavailable as exc:
            backoff = backoff or Backoff()
            delay = backoff.next()
            if not _lease_left(complete, delay, aq.clock.now()):
                raise  # the lease ends first: whoever leases the item next decides
            COMMITS.lost(exc)
            await anyio.sleep(delay)
            continue
        if backoff is not None:
            COMMITS.back()
        return result


async def ensure_work_queue(aq: AsyncQueueClient, name: str) -> None:
    """Create the workflow or step queue ``name`` (and the dead queue its
    settings name) unless it exists; an existing queue keeps its settings."""
    if name == DEAD_QUEUE:
        await aq.create_queue(DEAD_QUEUE, DEAD_SETTINGS, exist_ok=True)
        return
    await aq.create_queue(DEAD_QUEUE, DEAD_SETTINGS, exist_ok=True)
    await aq.create_queue(name, WORK_SETTINGS, exist_ok=True)


COMMITS = Outage(log, "querator: workflow commits")
"""Commits that failed with Unavailable are retried (see :func:`transact_creating`)."""


def _lease_left(complete: list[Leased], delay: float, now: datetime) -> bool:
    """Whether every item being completed is still leased ``delay`` seconds after
    ``now`` (a commit is fenced by the items' versions: repeating it is safe while
    they are held; an item with no lease, or none to complete, is not retried)."""
    if not complete:
        return False
    soon = now + timedelta(seconds=delay)
    return all(item.lease_deadline is not None and item.lease_deadline > soon for item in complete)


async def commit_held(aq: AsyncQueueClient, held: Leased, produce: Produce) -> bool:
    """Complete ``held`` and produce, in one transaction; False (logged) if its
    lease was lost meanwhile."""
    try:
        await transact_creating(aq, [held], not_colliding(held, produce))
    except Conflict as exc:
        log.warning("item %s (%s) lost its lease: result dropped (%s)", held.id, held.kind, exc)
        return False
    return True


async def commit_wake(
    aq: AsyncQueueClient, held: Leased, payload: StepPayload, produce: Produce | None = None
) -> bool:
    """Complete a step item with ``produce`` and a wake task for its run; False
    (logged) if its lease was lost meanwhile."""
    wake_ = wake_item(
        payload.run_id,
        payload.wake_tag(),
        trace=held.headers,
        workflow=payload.workflow,
        priority=payload.run_priority,
    )
    wake = {payload.workflow_queue: [wake_]}
    return await commit_held(aq, held, merge_items(produce or {}, wake))
