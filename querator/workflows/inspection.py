"""Inspecting runs: list them with their status, show one with its steps.

Everything is read from the records of the results queue
(``querator.results``): ``{run}/meta``, ``{run}/result``, ``{run}/cancel`` and
one ``{run}/{position}`` per step call. Runs are listed newest first through
the run index (:mod:`querator.workflows.run_index`), by status, workflow and
start time, a page at a time (``after``): a page costs the same however many
runs are stored.

    from querator.workflows import get_run, list_runs

    for info in list_runs(q, status="failed", workflow="shop.checkout", limit=20):
        print(info.run_id, info.started_at, info.error_type)
    detail = get_run(q, info.run_id)          # with .steps
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from datetime import datetime
from typing import Any, get_args

from querator.errors import Conflict, InvalidArgument, QueueNotFound
from querator.queue.client import QueueClient
from querator.queue.models import Item, StoredItem
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import check_count
from querator.workflows.attribute_listing import AttributeQuery, scan_by_attributes_async
from querator.workflows.attributes import AttributesRecord, AttributeValue, check_attributes
from querator.workflows.children import child_links
from querator.workflows.errors import RunNotFound
from querator.workflows.keys import (
    ENCODING,
    PROGRESS_SLOTS,
    RECORD_KIND,
    RECV_STEP,
    RESULTS_QUEUE,
    cancel_key,
    meta_key,
    progress_key,
    result_key,
    resume_key,
    step_key,
    wait_key,
)
from querator.workflows.run_attributes import current_attributes_async, first_snapshot_key
from querator.workflows.run_detail import (
    compensations,
    current_waits,
    parked_limits,
    pending_steps,
    run_items,
    unread_messages,
    waiting_for,
)
from querator.workflows.run_index import (
    entry_key,
    entry_keys,
    facet_prefix,
    parse_entry,
    since_bound,
)
from querator.workflows.run_models import ChildInfo, RunInfo, StepInfo, StepProgress
from querator.workflows.runs import RunStatus
from querator.workflows.sagas.compensation import saga_statuses
from querator.workflows.stored import ProgressRecord, RunMeta, RunRecord, StepRecord, WaitRecord

__all__ = [
    "ChildInfo",
    "RunInfo",
    "StepInfo",
    "StepProgress",
    "delete_present_async",
    "get_run",
    "get_run_async",
    "list_runs",
    "list_runs_async",
    "prune_entries_async",
    "run_heads_async",
    "run_infos_async",
    "run_status",
    "scan_runs_async",
]

INDEX_PAGE = 200
"""Index entries read per ``scan_keys`` call while listing."""
LOOKUP_RUNS = 200
"""Runs whose records one lookup reads (5 keys each; a lookup takes 1000)."""
_PENDING = ("running", "compensating", "compensation_failed")
"""Statuses of runs without a stored end."""
STEP_WINDOW = 64
"""Step records looked up at once by :func:`get_run`; it stops at an empty window."""


def run_status(record: RunRecord | None) -> RunStatus:
    """The status of a run whose ``{run}/result`` record is ``record`` (None: none yet)."""
    return "running" if record is None else record.final_status()


def _run_info(
    run_id: str, meta: RunMeta, record: RunRecord | None, cancel_requested: bool
) -> RunInfo:
    error = record.error if record is not None else None
    return RunInfo(
        run_id=run_id,
        workflow=meta.workflow,
        status=run_status(record),
        queue=meta.queue,
        started_at=meta.started_at,
        finished_at=record.finished_at if record is not None else None,
        args=meta.args,
        result=record.result if record is not None else None,
        error_type=error.type if error else None,
        error_message=error.message if error else None,
        error_traceback=error.traceback if error else None,
        cancel_requested=cancel_requested,
        parent_run_id=meta.parent.run_id if meta.parent else None,
        deadline=meta.deadline,
        continued_as=record.continued_as if record is not None else None,
        continued_from=meta.continued_from,
    )


async def run_infos_async(aq: AsyncQueueClient, run_ids: list[str]) -> dict[str, RunInfo]:
    """RunInfos of these runs by id, from their records (one lookup per 200 runs);
    runs without a meta record are left out."""
    return {run_id: info for run_id, (info, _) in (await run_heads_async(aq, run_ids)).items()}


async def run_heads_async(
    aq: AsyncQueueClient, run_ids: list[str]
) -> dict[str, tuple[RunInfo, AttributesRecord]]:
    """:func:`run_infos_async` with each run's current attributes snapshot."""
    infos: list[RunInfo] = []
    unique = list(dict.fromkeys(run_ids))
    metas: dict[str, RunMeta] = {}
    changed: set[str] = set()
    for chunk in (unique[i : i + LOOKUP_RUNS] for i in range(0, len(unique), LOOKUP_RUNS)):
        keys = [k for run_id in chunk for k in _head_keys(run_id)]
        found = await aq.lookup(RESULTS_QUEUE, keys)
        for run_id in chunk:
            meta, result, cancel, resumed, attrs = (found.get(k) for k in _head_keys(run_id))
            if meta is None:
                continue
            record = RunRecord.model_validate_json(result.payload) if result else None
            if resumed is not None:  # a resumed run's old end is moot
                record = None
            metas[run_id] = RunMeta.model_validate_json(meta.payload)
            if attrs is not None:
                changed.add(run_id)
            infos.append(_run_info(run_id, metas[run_id], record, cancel is not None))
    current = await current_attributes_async(aq, metas, changed)
    return {
        info.run_id: (
            info.model_copy(update={"attributes": current[info.run_id].values}),
            current[info.run_id],
        )
        for info in await _with_saga_status(aq, infos)
    }


def _head_keys(run_id: str) -> tuple[str, str, str, str, str]:
    return (
        meta_key(run_id),
        result_key(run_id),
        cancel_key(run_id),
        resume_key(run_id),
        first_snapshot_key(run_id),
    )


async def _with_saga_status(aq: AsyncQueueClient, infos: list[RunInfo]) -> list[RunInfo]:
    """Running sagas may be ``compensating`` or ``compensation_failed``."""
    sagas = await saga_statuses(aq, [i.run_id for i in infos if i.status == "running"])
    return [
        i.model_copy(update={"status": sagas[i.run_id]}) if i.run_id in sagas else i for i in infos
    ]


def _stored_status(info: RunInfo) -> RunStatus:
    """The status the run's index entries are written for (pending saga states are
    ``running`` there)."""
    return "running" if info.status in _PENDING else info.status


async def list_runs_async(
    aq: AsyncQueueClient,
    *,
    status: RunStatus | None = None,
    workflow: str | None = None,
    since: datetime | None = None,
    after: str | None = None,
    limit: int = 100,
    name: str | None = None,
    attributes: Mapping[str, AttributeValue] | None = None,
) -> list[RunInfo]:
    """Up to ``limit`` runs, newest first (by start time), optionally only those with
    this ``status``, of this ``workflow`` (its persisted name) and started at or after
    ``since`` (timezone-aware); ``steps`` is empty. Pass the last run id of a page
    as ``after`` to get the next page. ``name`` is the deprecated old name of
    ``workflow``. ``attributes``: only runs holding every one of these search
    attributes now (equal values of the same type; checked as
    ``start(attributes=...)``'s, :class:`~querator.errors.InvalidArgument`).

    A page reads the run index (:mod:`querator.workflows.run_index`), or with
    ``attributes`` the index of the first one
    (:mod:`querator.workflows.attribute_listing`): its cost does not grow with
    the number of runs stored.
    """
    workflow = _renamed_workflow(workflow, name)
    if status is not None and status not in get_args(RunStatus):
        raise InvalidArgument("status", f"must be one of {get_args(RunStatus)}, got {status!r}")
    if workflow is not None and (not isinstance(workflow, str) or not 1 <= len(workflow) <= 512):
        raise InvalidArgument("workflow", "must be a workflow's name (1 to 512 characters)")
    if since is not None and (since.tzinfo is None or since.utcoffset() is None):
        raise InvalidArgument("since", "must be a timezone-aware datetime")
    check_count("limit", limit, 1, 10_000)
    wanted = check_attributes(attributes) if attributes is not None else {}
    if wanted:
        query = AttributeQuery(wanted, workflow, status, since, after, limit)
        try:
            found, dropped = await scan_by_attributes_async(aq, run_heads_async, query)
        except QueueNotFound:
            return []
        await delete_present_async(aq, dropped)
        return found
    facet: RunStatus | None = "running" if status in _PENDING else status
    prefix = facet_prefix(workflow, facet)
    try:
        cursor = await _cursor(aq, prefix, after)
    except QueueNotFound:
        return []  # no run was ever started in this store
    stop = since_bound(prefix, since) if since is not None else None
    runs, stale = await scan_runs_async(aq, prefix, facet, cursor, stop, status, workflow, limit)
    await prune_entries_async(aq, stale)
    return runs


async def scan_runs_async(
    aq: AsyncQueueClient,
    prefix: str,
    facet: RunStatus | None,
    cursor: str | None,
    stop: str | None,
    status: RunStatus | None,
    workflow: str | None,
    limit: int,
) -> tuple[list[RunInfo], list[tuple[str, str]]]:
    """:func:`list_runs_async`'s walk of the index under ``prefix`` past ``cursor``:
    the runs listed, and the entries to prune (item id, run id) (see :func:`prune_entries_async`).

    An entry is listed only when it is its run's own (the key its start time
    gives): starters that raced with one idempotency key each wrote entries
    stamped with their own clock, for one run; the others are pruned.
    """
    runs: list[RunInfo] = []
    stale: list[tuple[str, str]] = []
    while len(runs) < limit:
        page = await aq.scan_keys(RESULTS_QUEUE, prefix, after=cursor, limit=INDEX_PAGE)
        keys = [item.dedup_key or "" for item in page]
        inside = [key for key in keys if stop is None or key < stop]
        infos = await run_infos_async(aq, [parse_entry(key).run_id for key in inside])
        for item, key in zip(page, inside, strict=False):
            info = infos.get(parse_entry(key).run_id)
            if info is None or (workflow is not None and info.workflow != workflow):
                continue
            if key != entry_key(prefix, info.run_id, info.started_at):
                stale.append((item.id, info.run_id))  # a racing starter's, for one run
            elif facet is not None and _stored_status(info) != facet:
                stale.append((item.id, info.run_id))
            elif status is None or info.status == status:
                runs.append(info)
                if len(runs) == limit:
                    break
        if len(inside) < INDEX_PAGE:
            break
        cursor = keys[-1]
    return runs, stale


async def _cursor(aq: AsyncQueueClient, prefix: str, after: str | None) -> str | None:
    """The index key to list past for a page that starts after run ``after``."""
    if after is None:
        await aq.get_queue(RESULTS_QUEUE)  # QueueNotFound: nothing was ever started
        return None
    found = await aq.lookup(RESULTS_QUEUE, [meta_key(after)])
    if meta_key(after) not in found:
        raise InvalidArgument("after", f"no run {after!r} is stored")
    meta = RunMeta.model_validate_json(found[meta_key(after)].payload)
    return entry_key(prefix, after, meta.started_at)


async def prune_entries_async(aq: AsyncQueueClient, stale: list[tuple[str, str]]) -> None:
    """Delete index entries (item id, run id) of a status their runs had left when they
    were read, then write again the entries of their runs' current status.

    An entry is deleted by the item id the lister read, never by its key (an
    entry item never changes: its id names its one version). A resume replaces
    its run's stale ``running`` entries with new items before it commits and
    deletes its ``failed``/``cancelled`` entries in its commit
    (:func:`~querator.workflows.rerun.resume_async`), so every entry a run
    writes after a resume is a new item: no lister deletes a live entry, even
    one that dies right after its delete. The entries written again afterwards
    are no-ops where present. Another lister may have deleted some entries
    already.
    """
    for start in range(0, len(stale), 1000):
        chunk = stale[start : start + 1000]
        await delete_present_async(aq, [item_id for item_id, _ in chunk])
        await _restore(aq, [run_id for _, run_id in chunk])


async def delete_present_async(aq: AsyncQueueClient, ids: list[str]) -> None:
    """Delete these items of the results queue, those still there (another client
    may have deleted some: the others still go)."""
    while ids:
        try:
            await aq.delete_items(RESULTS_QUEUE, ids)
            return
        except Conflict as exc:
            left = [item_id for item_id in ids if item_id not in exc.reasons]
            if len(left) == len(ids):
                raise
            ids = left


async def _restore(aq: AsyncQueueClient, run_ids: list[str]) -> None:
    """Write the index entries of these runs' current status (no-ops where present)."""
    infos = await run_infos_async(aq, run_ids)
    items = [  # as layout.index_items, from what the listing read
        Item(payload=b"", kind=RECORD_KIND, encoding=ENCODING, reference=run_id, dedup_key=key)
        for run_id, info in infos.items()
        for key in entry_keys(
            run_id, info.workflow, info.started_at, _stored_status(info), new=True
        )
    ]
    for start in range(0, len(items), 1000):
        await aq.produce(RESULTS_QUEUE, items[start : start + 1000])


async def _steps(
    aq: AsyncQueueClient, run_id: str
) -> tuple[tuple[StepInfo, ...], tuple[StepProgress, ...], dict[int, WaitRecord]]:
    """Ended step calls, the progress of those not ended, and the wait records
    of calls without an outcome, by position."""
    steps: list[StepInfo] = []
    running: list[StepProgress] = []
    waits: dict[int, WaitRecord] = {}
    start = 0
    while True:
        window = range(start, start + STEP_WINDOW)
        keys = [step_key(run_id, i) for i in window] + [wait_key(run_id, i) for i in window]
        keys += [progress_key(run_id, i, slot) for i in window for slot in PROGRESS_SLOTS]
        found = await aq.lookup(RESULTS_QUEUE, keys)
        if not found:
            return tuple(steps), tuple(running), waits
        for position in window:
            progress = _progress(
                position,
                [
                    found[k]
                    for s in PROGRESS_SLOTS
                    if (k := progress_key(run_id, position, s)) in found
                ],
            )
            item = found.get(step_key(run_id, position))
            if item is not None:
                record = StepRecord.model_validate_json(item.payload)
                steps.append(_step_info(position, record, progress))
            elif progress is not None:
                running.append(progress)
            wait = found.get(wait_key(run_id, position))
            if item is None and wait is not None:
                waits[position] = WaitRecord.model_validate_json(wait.payload)
        start += STEP_WINDOW


def _progress(position: int, items: list[StoredItem]) -> StepProgress | None:
    """The newest of a step's progress records, if any."""
    records = [ProgressRecord.model_validate_json(item.payload) for item in items]
    if not records:
        return None
    record = max(records, key=lambda r: r.gen)
    return StepProgress(
        position=position,
        attempt=record.attempt,
        updated_at=record.updated_at,
        progress=record.progress,
    )


def _step_info(position: int, record: StepRecord, progress: StepProgress | None) -> StepInfo:
    return StepInfo(
        position=position,
        step=record.step,
        ok=record.ok,
        attempts=record.attempts,
        finished_at=record.finished_at,
        result=record.result,
        error_type=record.error.type if record.error else None,
        error_message=record.error.message if record.error else None,
        error_traceback=record.error.traceback if record.error else None,
        progress=progress,
        until=record.until,
        started_at=record.started_at,
        worker=record.worker,
    )


async def get_run_async(aq: AsyncQueueClient, run_id: str) -> RunInfo:
    """One run with its ended step calls; RunNotFound for an unknown run."""
    try:
        info = (await run_infos_async(aq, [run_id])).get(run_id)
    except QueueNotFound:
        info = None
    if info is None:
        raise RunNotFound(run_id)
    steps, running, waits = await _steps(aq, run_id)
    extras: dict[str, Any] = {"steps": steps, "progress": running, "in_progress": running}
    extras["compensations"] = tuple(await compensations(aq, run_id))
    extras["children"] = await _children(aq, run_id)
    unread, more = await unread_messages(aq, run_id, _read_messages(steps))
    extras["unread"], extras["unread_more"] = tuple(unread), more
    if info.finished_at is None:
        items = await run_items(aq, run_id, info.queue)
        pending = pending_steps(items)
        extras["pending"] = tuple(pending)
        extras["waiting_for"] = tuple(await waiting_for(aq, items))
        sleeps = [(s.position, s.finished_at, s.until) for s in steps if s.until is not None]
        parked = parked_limits(items)
        now = aq.clock.now()
        extras["waits"] = tuple(current_waits(waits, sleeps, pending, parked, now))
    return info.model_copy(update=extras)


def _read_messages(steps: tuple[StepInfo, ...]) -> set[str]:
    """The keys of the messages the run's ``recv`` calls read."""
    read = set()
    for s in steps:
        if s.step == RECV_STEP and s.result is not None:
            key = json.loads(s.result).get("message")
            if isinstance(key, str):
                read.add(key)
    return read


async def _children(aq: AsyncQueueClient, run_id: str) -> tuple[ChildInfo, ...]:
    """The child runs ``run_id`` started, with their status."""
    links = await child_links(aq, run_id)
    infos = await run_infos_async(aq, [link.run_id for link in links])
    return tuple(
        ChildInfo(
            run_id=link.run_id,
            workflow=link.workflow,
            position=link.position,
            parent_close_policy=link.policy,
            status=info.status if (info := infos.get(link.run_id)) is not None else None,
        )
        for link in links
    )


def list_runs(
    q: QueueClient,
    *,
    status: RunStatus | None = None,
    workflow: str | None = None,
    since: datetime | None = None,
    after: str | None = None,
    limit: int = 100,
    name: str | None = None,
    attributes: Mapping[str, AttributeValue] | None = None,
) -> list[RunInfo]:
    """See :func:`list_runs_async` (``name`` is the deprecated old name of ``workflow``)."""
    workflow = _renamed_workflow(workflow, name)
    return q.call(list_runs_in_order, q.aio, status, workflow, since, after, limit, attributes)


async def list_runs_in_order(
    aq: AsyncQueueClient,
    status: RunStatus | None,
    workflow: str | None,
    since: datetime | None,
    after: str | None,
    limit: int,
    attributes: Mapping[str, AttributeValue] | None,
) -> list[RunInfo]:
    """:func:`list_runs_async` with every filter given, in order (what the
    clients' ``list_runs`` forward)."""
    return await list_runs_async(
        aq,
        status=status,
        workflow=workflow,
        since=since,
        after=after,
        limit=limit,
        attributes=attributes,
    )


def _renamed_workflow(workflow: str | None, name: str | None) -> str | None:
    """``workflow``, or the value given under its old name ``name`` (with a warning)."""
    if name is None:
        return workflow
    warnings.warn(
        "list_runs(name=...) is deprecated and will be removed: use list_runs(workflow=...)",
        DeprecationWarning,
        stacklevel=3,  # the caller of list_runs / list_runs_async
    )
    if workflow is not None and workflow != name:
        raise InvalidArgument("name", "give workflow= only (name= is its deprecated old name)")
    return name


def get_run(q: QueueClient, run_id: str) -> RunInfo:
    """See :func:`get_run_async`."""
    return q.call(get_run_async, q.aio, run_id)
