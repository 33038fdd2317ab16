"""Inspecting runs: list them with their status, show one with its steps.

Everything is read from the records of the results queue
(``querator.results``): ``{run}/meta``, ``{run}/result``, ``{run}/cancel`` and
one ``{run}/{position}`` per step call. Nothing is indexed for this: listing
scans the results queue in item order (every record of every run, not only the
meta records) and looks up the result records of the runs it finds, so its
cost grows with the number of records kept. Use filters and ``limit`` and page
with ``after``.

```python
from querator.workflows import get_run, list_runs
for info in list_runs(q, status="failed", name="shop.checkout", limit=20):
    print(info.run_id, info.started_at, info.error_type)
detail = get_run(q, run_id)          # with .steps
```
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict

from querator.errors import InvalidArgument, QueueNotFound
from querator.queue.client import Querator
from querator.queue.models import StoredItem
from querator.queue.service import AsyncQuerator
from querator.queue.validation import check_count
from querator.workflows.errors import RunNotFound
from querator.workflows.layout import (
    PROGRESS_SLOTS,
    RECORD_KIND,
    RESULTS_QUEUE,
    ProgressRecord,
    RunMeta,
    RunRecord,
    StepRecord,
    cancel_key,
    meta_key,
    progress_key,
    result_key,
    step_key,
)
from querator.workflows.runs import RunStatus
from querator.workflows.sagas.compensation import saga_statuses

__all__ = [
    "RunInfo",
    "StepInfo",
    "StepProgress",
    "get_run",
    "get_run_async",
    "list_runs",
    "list_runs_async",
    "run_status",
]

SCAN_BATCH = 500
"""Records read per ``list_items`` call while listing (each meta needs 2 lookup keys)."""
STEP_WINDOW = 64
"""Step records looked up at once by :func:`get_run`; it stops at an empty window."""
META_SUFFIX = "/meta"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StepProgress(_Frozen):
    """The last progress a step call reported (``report_progress``)."""

    position: int
    attempt: int
    """The attempt that reported it."""
    updated_at: datetime
    progress: dict[str, Any]


class StepInfo(_Frozen):
    """How one step call of a run ended (its ``{run}/{position}`` record)."""

    position: int
    """The call's position in the body (0-based, in call order)."""
    step: str
    """The step's persisted name."""
    ok: bool
    """True when the step returned; False when it failed for good."""
    attempts: int
    """Leases of the step's item used, the successful one included."""
    finished_at: datetime
    """When the outcome was recorded."""
    result: str | None = None
    """The result as stored (JSON text), when ``ok``."""
    error_type: str | None = None
    """The exception's type name, when not ``ok``."""
    error_message: str | None = None
    """The exception's message, when not ``ok``."""
    error_traceback: str | None = None
    """The formatted traceback of the last failed attempt, when not ``ok`` (its end)."""
    progress: StepProgress | None = None
    """The last progress the step reported, if it reported any."""


class RunInfo(_Frozen):
    """What is stored about one run. ``steps`` is filled by :func:`get_run` only."""

    run_id: str
    workflow: str
    """The workflow's persisted name."""
    status: RunStatus
    queue: str
    """The run's workflow queue (its wake tasks)."""
    started_at: datetime
    finished_at: datetime | None = None
    """None while the run is running."""
    args: str
    """The run's arguments as stored (JSON text)."""
    result: str | None = None
    """The run's result as stored (JSON text), once completed."""
    error_type: str | None = None
    """Why it failed or was cancelled: the exception's type name."""
    error_message: str | None = None
    error_traceback: str | None = None
    """The traceback of the body's error (its end), when the body raised."""
    cancel_requested: bool = False
    """Cancellation was asked for (the run may still be running until a worker ends it)."""
    parent_run_id: str | None = None
    """The parent run, for a child workflow."""
    deadline: datetime | None = None
    """The run fails once replayed past this instant (``timeout=``)."""
    steps: tuple[StepInfo, ...] = ()
    """The step calls that ended, by position (empty in :func:`list_runs`)."""
    in_progress: tuple[StepProgress, ...] = ()
    """Step calls without an outcome yet that reported progress, by position
    (empty in :func:`list_runs`)."""


def run_status(record: RunRecord | None) -> RunStatus:
    """The status of a run whose ``{run}/result`` record is ``record`` (None: none yet)."""
    if record is None:
        return "running"
    if record.status is not None:
        return record.status
    if record.cancelled:
        return "cancelled"
    return "completed" if record.ok else "failed"


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
    )


async def _complete_infos(aq: AsyncQuerator, metas: list[tuple[str, RunMeta]]) -> list[RunInfo]:
    """RunInfos for these metas, with their result and cancel records (one lookup)."""
    if not metas:
        return []
    keys = [k for run_id, _ in metas for k in (result_key(run_id), cancel_key(run_id))]
    found = await aq.lookup(RESULTS_QUEUE, keys)
    infos = []
    for run_id, meta in metas:
        item = found.get(result_key(run_id))
        record = RunRecord.model_validate_json(item.payload) if item else None
        infos.append(_run_info(run_id, meta, record, cancel_key(run_id) in found))
    return await _with_saga_status(aq, infos)


async def _with_saga_status(aq: AsyncQuerator, infos: list[RunInfo]) -> list[RunInfo]:
    """Running sagas may be ``compensating`` or ``compensation_failed``."""
    sagas = await saga_statuses(aq, [i.run_id for i in infos if i.status == "running"])
    return [
        i.model_copy(update={"status": sagas[i.run_id]}) if i.run_id in sagas else i for i in infos
    ]


async def _scan(aq: AsyncQuerator, after: str | None) -> AsyncIterator[list[StoredItem]]:
    """Pages of the results queue, partition by partition, from just past ``after``'s meta."""
    try:
        info = await aq.get_queue(RESULTS_QUEUE)
    except QueueNotFound:
        return  # no run was ever started in this store
    partition, pivot, skip = 0, None, None
    if after is not None:
        found = await aq.lookup(RESULTS_QUEUE, [meta_key(after)])
        if meta_key(after) not in found:
            raise InvalidArgument("after", f"no run {after!r} is stored")
        item = found[meta_key(after)]
        partition, pivot, skip = item.partition, item.id, item.id
    while partition < info.settings.partitions:
        page = await aq.list_items(
            RESULTS_QUEUE, partition=partition, pivot=pivot, limit=SCAN_BATCH
        )
        yield [item for item in page if item.id != skip]
        if len(page) < SCAN_BATCH:
            partition, pivot, skip = partition + 1, None, None
        else:
            pivot = skip = page[-1].id


def _metas(page: list[StoredItem], name: str | None) -> list[tuple[str, RunMeta]]:
    metas = []
    for item in page:
        key = item.dedup_key
        if item.kind != RECORD_KIND or key is None or not key.endswith(META_SUFFIX):
            continue
        meta = RunMeta.model_validate_json(item.payload)
        if name is None or meta.workflow == name:
            metas.append((key.removesuffix(META_SUFFIX), meta))
    return metas


async def list_runs_async(
    aq: AsyncQuerator,
    *,
    status: RunStatus | None = None,
    name: str | None = None,
    after: str | None = None,
    limit: int = 100,
) -> list[RunInfo]:
    """Up to ``limit`` runs in the order they were started (per partition of the
    results queue), optionally only those with this ``status`` and workflow
    ``name``; ``steps`` is empty. Pass the last run id of a page as ``after``
    to get the next page. Scans records (see the module doc for the cost)."""
    if status is not None and status not in get_args(RunStatus):
        raise InvalidArgument("status", f"must be one of {get_args(RunStatus)}, got {status!r}")
    check_count("limit", limit, 1, 10_000)
    runs: list[RunInfo] = []
    async for page in _scan(aq, after):
        for run in await _complete_infos(aq, _metas(page, name)):
            if status is None or run.status == status:
                runs.append(run)
                if len(runs) == limit:
                    return runs
    return runs


async def _steps(
    aq: AsyncQuerator, run_id: str
) -> tuple[tuple[StepInfo, ...], tuple[StepProgress, ...]]:
    """Ended step calls, and the progress of those not ended, by position."""
    steps: list[StepInfo] = []
    running: list[StepProgress] = []
    start = 0
    while True:
        window = range(start, start + STEP_WINDOW)
        keys = [step_key(run_id, i) for i in window]
        keys += [progress_key(run_id, i, slot) for i in window for slot in PROGRESS_SLOTS]
        found = await aq.lookup(RESULTS_QUEUE, keys)
        if not found:
            return tuple(steps), tuple(running)
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
        start += STEP_WINDOW


def _progress(position: int, items: list[StoredItem]) -> StepProgress | None:
    """The newest of a step's progress records, if any."""
    records = [ProgressRecord.model_validate_json(item.payload) for item in items]
    if not records:
        return None
    record = max(records, key=lambda r: r.seq)
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
    )


async def get_run_async(aq: AsyncQuerator, run_id: str) -> RunInfo:
    """One run with its ended step calls; RunNotFound for an unknown run."""
    try:
        found = await aq.lookup(
            RESULTS_QUEUE, [meta_key(run_id), result_key(run_id), cancel_key(run_id)]
        )
    except QueueNotFound:
        found = {}
    meta_item = found.get(meta_key(run_id))
    if meta_item is None:
        raise RunNotFound(run_id)
    result_item = found.get(result_key(run_id))
    record = RunRecord.model_validate_json(result_item.payload) if result_item else None
    meta = RunMeta.model_validate_json(meta_item.payload)
    [info] = await _with_saga_status(
        aq, [_run_info(run_id, meta, record, cancel_key(run_id) in found)]
    )
    steps, running = await _steps(aq, run_id)
    return info.model_copy(update={"steps": steps, "in_progress": running})


def list_runs(
    q: Querator,
    *,
    status: RunStatus | None = None,
    name: str | None = None,
    after: str | None = None,
    limit: int = 100,
) -> list[RunInfo]:
    """See :func:`list_runs_async`."""
    return q.call(list_runs_async, q.aio, status=status, name=name, after=after, limit=limit)


def get_run(q: Querator, run_id: str) -> RunInfo:
    """See :func:`get_run_async`."""
    return q.call(get_run_async, q.aio, run_id)
