"""What querator stores for a run: the records (``{run}/meta``, a step's
``{run}/{position}``, ``{run}/result`` …) and item payloads, and the items that
carry them. Where each lives: :mod:`querator.workflows.keys`.

Fields are only ever added, with defaults, so old records keep their meaning,
and readers ignore fields they do not know, so a worker of the previous version
reads what a newer one wrote (a rolling deploy).
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, Field

from querator.clock import stamp
from querator.model_bases import StoredModel
from querator.queue.models import Item
from querator.queue.record_store import Versioned
from querator.workflows.attributes import AttributesRecord, AttributeValue, attribute_entry_keys
from querator.workflows.keys import (
    ENCODING,
    RECORD_KIND,
    RESULTS_QUEUE,
    aborted_key,
    cancel_key,
    compensating_key,
    meta_key,
    step_kind,
    wake_kind,
)
from querator.workflows.run_index import entry_keys

RunStatus = Literal[
    "running",
    "completed",
    "failed",
    "cancelled",
    "compensating",
    "compensated",
    "compensation_failed",
]
"""What :meth:`querator.workflows.runs.RunHandle.status` reports (the last three
for sagas only)."""


class ErrorInfo(StoredModel):
    """An exception, as stored."""

    type: str
    message: str
    traceback: str | None = None
    """The formatted traceback (its last :data:`TRACEBACK_LIMIT` characters)."""


class ParentLink(StoredModel):
    """Where a child run reports its outcome: record ``{run_id}/{position}``."""

    run_id: str
    position: int
    queue: str
    """The parent's workflow queue (for its wake task)."""
    workflow: str = ""
    """The parent's workflow (its wake task's kind); empty in links written before routing."""


ParentClosePolicy = Literal["cancel", "abandon", "wait"]
"""What becomes of a running child run when its parent ends without a result
(cancelled, failed, timed out); Temporal's ``ParentClosePolicy``:

- ``"cancel"`` (``REQUEST_CANCEL``, the default): the parent's end asks the
  child to cancel, in the same transaction;
- ``"abandon"`` (``ABANDON``): the child runs on, on its own;
- ``"wait"``: the parent's end waits until the child ended on its own (the
  parent reads ``"running"`` until then).
"""


class ChildLink(StoredModel):
    """``{run}/child/{position}``: a child run started at ``position``."""

    run_id: str
    workflow: str
    queue: str
    """The child's workflow queue (for its cancel wake)."""
    position: int
    policy: ParentClosePolicy = "cancel"


class RunMeta(StoredModel):
    """``{run}/meta``: what was started."""

    workflow: str
    args: str
    queue: str
    started_at: datetime
    deadline: datetime | None = None
    """The run fails with ``WorkflowTimeout`` once replayed past this (``timeout=``)."""
    parent: ParentLink | None = None
    """Set on child runs: the parent's record to write when the child ends."""
    trace: dict[str, str] = Field(default_factory=dict)
    """The run's trace context (W3C ``traceparent``/``tracestate``; empty when not
    traced): the headers of its items carry it, so every worker joins the trace."""
    nonce: str | None = None
    """Set by a start with an idempotency key: of two starts racing with one
    key, the one whose nonce the stored meta holds created the run."""
    continued_from: str | None = None
    """The run that continued as this one (``continue_as_new``)."""
    priority: int = 0
    """The run's priority: its wake tasks carry it, and its steps unless a step
    sets its own (``start(priority=...)``, ``@workflow(priority=...)``)."""
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)
    """The run's search attributes at its start (``start(attributes=...)``;
    ``set_attributes`` changes them: :mod:`querator.workflows.attributes`)."""


class CancelRecord(StoredModel):
    """``{run}/cancel``: cancellation was asked for."""

    reason: str = ""
    requested_at: datetime = Field(default_factory=stamp)


class StepRecord(StoredModel):
    """``{run}/{position}``: how a step call ended."""

    step: str
    ok: bool
    result: str | None = None
    error: ErrorInfo | None = None
    attempts: int = 0
    finished_at: datetime = Field(default_factory=stamp)
    until: datetime | None = None
    """Durable timers (step ``querator.sleep``): the instant the sleep ends."""
    started_at: datetime | None = None
    """When the last attempt began (None for records that are not attempts:
    timers, messages, published values, child runs, and records written before)."""
    worker: str | None = None
    """The client id of the worker that ran the last attempt."""


class AttemptRecord(StoredModel):
    """``{record key}/attempt/{n}``: attempt ``n`` of a step call that failed and
    was retried (the last attempt is the call's own record)."""

    attempt: int
    """1-based, deferrals included (as :attr:`StepRecord.attempts`)."""
    worker: str
    """The client id of the worker that ran it."""
    started_at: datetime
    ended_at: datetime = Field(default_factory=stamp)
    error: ErrorInfo
    """What it raised (no traceback: the last failure keeps one)."""


class WaitRecord(StoredModel):
    """``{run}/{position}/wait``: what the body parked at ``position`` waits
    for, from its first park (shown by ``get_run``; nothing reads it to decide)."""

    kind: Literal["message", "event", "child"]
    name: str
    """The topic, the event's name or the child run's id."""
    since: datetime = Field(default_factory=stamp)
    until: datetime | None = None
    """When the wait times out (None: never; a child: its deadline)."""


class RunRecord(StoredModel):
    """``{run}/result``: how the run ended."""

    ok: bool
    result: str | None = None
    error: ErrorInfo | None = None
    finished_at: datetime = Field(default_factory=stamp)
    cancelled: bool = False
    """True when the run ended by cancellation (``error`` says why)."""
    status: RunStatus | None = None
    """Set when the status is not implied by ``ok``/``cancelled`` (``compensated``)."""
    compensations: tuple[str, ...] = ()
    """Sagas: the compensations that ran, in the order they ran (``name@position``)."""
    saga: bool = False
    """True for the runs of a ``@saga`` (their ``result()`` raises ``SagaFailed``)."""
    continued_as: str | None = None
    """The run this one continued as (``continue_as_new``): its successor, started
    by the commit that stored this record; ``result()`` follows it."""
    continued_args: str | None = None
    """The successor's encoded arguments (with :attr:`continued_as`)."""
    continued_attributes: dict[str, AttributeValue] | None = None
    """The successor's search attributes at its start (with :attr:`continued_as`):
    those the run held when it continued."""

    def final_status(self) -> RunStatus:
        """The status this record ends the run with."""
        if self.status is not None:
            return self.status
        if self.cancelled:
            return "cancelled"
        return "completed" if self.ok else "failed"


class ProgressRecord(StoredModel, Versioned):
    """``{run}/{position}/progress/a`` or ``/b``: the last progress a step call
    reported (a record of :data:`querator.workflows.progress.PROGRESS`)."""

    attempt: int
    """The attempt that reported it (1-based, deferrals included)."""
    gen: int = Field(default=0, validation_alias=AliasChoices("gen", "seq"))
    """Reports of the step call so far, minus one: the newest record wins
    (older records call it ``seq``: read as ``gen``)."""
    progress: dict[str, Any]
    """What the step reported (JSON)."""
    updated_at: datetime = Field(default_factory=stamp)


class WakePayload(StoredModel):
    """A wake task: replay ``run_id``."""

    run_id: str
    meta: RunMeta | None = None
    """Carried by the start wake of a run without a deadline: its first replay
    knows what was started without looking the run up (see
    :func:`querator.workflows.engine.history.started`)."""


class StepPayload(StoredModel):
    """A step item: run step ``step`` at ``position`` of ``run_id``."""

    run_id: str
    position: int
    step: str
    args: str
    workflow_queue: str
    workflow: str = ""
    """The run's workflow (its wake tasks' kind); empty in items written before routing."""
    deferrals: int = 0
    """How many times the step raised ``Defer`` (each deferral is a fresh item)."""
    prior_attempts: int = 0
    """Failed attempts made by the items before the last deferral."""
    slot: str | None = None
    """Compensations: the record key after ``{run}/`` (``c{k}`` or ``c{k}/r{round}``);
    None for step calls (``{position}``)."""
    priority: int = 0
    """The step item's priority (``@step(priority=...)``, else its run's)."""
    run_priority: int = 0
    """The run's priority: the wake task this item produces when it ends carries it."""

    def record_key(self) -> str:
        """Key of the record this item writes (and of its wake's tag)."""
        return f"{self.run_id}/{self.slot if self.slot is not None else self.position}"

    def wake_tag(self) -> str:
        """Tag of the wake task produced when this item ends."""
        return self.slot if self.slot is not None else str(self.position)

    def start_keys(self) -> list[str]:
        """What a worker looks up before running this item: its own record (it
        already ran) and the records that skip it (a compensation always runs;
        a step is skipped once its run is cancelled, or its saga aborted or
        compensating). The record key comes first."""
        if self.slot is not None:
            return [self.record_key()]
        run_id = self.run_id
        return [
            self.record_key(),
            cancel_key(run_id),
            aborted_key(run_id),
            compensating_key(run_id),
        ]


class CompensationEntry(StoredModel):
    """One compensation a saga must run: undo the step at ``position``."""

    position: int
    step: str
    """The compensated step's name."""
    name: str
    """The compensation's persisted name."""
    queue: str
    """Where its items go."""
    args: str
    """Its encoded arguments (the step's arguments, then its result)."""


class CompensatingRecord(StoredModel):
    """``{run}/compensating``: the saga failed and is being compensated.

    ``plan`` is fixed when written: the compensations in the order they run
    (reverse order of the steps' completion).
    """

    error: ErrorInfo
    """Why the saga is compensated (the body's error, a timeout, a cancellation)."""
    cancelled: bool = False
    plan: tuple[CompensationEntry, ...] = ()
    started_at: datetime = Field(default_factory=stamp)


class CompensationFailedRecord(StoredModel):
    """``{run}/cfailed/{g}``: compensation ``index`` failed for good (the g-th time)."""

    index: int
    name: str
    error: ErrorInfo | None = None
    failed_at: datetime = Field(default_factory=stamp)


class RedriveRecord(StoredModel):
    """``{run}/redrive/{g}``: ``retry_compensation`` answered ``{run}/cfailed/{g}``."""

    index: int
    requested_at: datetime = Field(default_factory=stamp)


class ResumeRecord(StoredModel):
    """``{run}/resume``: run this failed or cancelled run again from ``position``."""

    position: int | None
    """The first failed step's position (None: only the body's end is undone)."""
    requested_at: datetime = Field(default_factory=stamp)


def record_item(key: str, record: BaseModel, run_id: str) -> Item:
    """A results-queue item holding ``record`` under ``key``."""
    return Item(
        payload=record.model_dump_json().encode(),
        kind=RECORD_KIND,
        encoding=ENCODING,
        reference=run_id,
        dedup_key=key,
    )


def wake_item(
    run_id: str,
    tag: str,
    at: datetime | None = None,
    meta: RunMeta | None = None,
    trace: Mapping[str, str] | None = None,
    *,
    workflow: str,
    priority: int = 0,
) -> Item:
    """A wake task of a run of ``workflow`` due at ``at`` (None: now).

    ``tag`` (``start``, ``cancel``, ``deadline`` or a position) keeps each
    wakeup distinct; ``meta``: see :attr:`WakePayload.meta`; ``trace``: the
    run's trace context (:attr:`RunMeta.trace`), for the item's headers. Its
    kind names the workflow: only workers that serve it lease it; ``priority``:
    the run's (:attr:`RunMeta.priority`).
    """
    return Item(
        payload=WakePayload(run_id=run_id, meta=meta).model_dump_json().encode(),
        kind=wake_kind(workflow),
        encoding=ENCODING,
        reference=run_id,
        dedup_key=f"{run_id}/wake/{tag}",
        enqueue_at=at,
        headers=dict(trace) if trace else {},
        priority=priority,
    )


def step_item(
    payload: StepPayload, at: datetime | None = None, trace: Mapping[str, str] | None = None
) -> Item:
    """The item that runs one step call, due at ``at`` (None: now); ``trace``:
    the run's trace context, for the item's headers."""
    key = f"{payload.record_key()}/step"
    if payload.deferrals:
        key += f"/d{payload.deferrals}"
    return Item(
        payload=payload.model_dump_json().encode(),
        kind=step_kind(payload.step),
        encoding=ENCODING,
        reference=payload.run_id,
        dedup_key=key,
        enqueue_at=at,
        headers=dict(trace) if trace else {},
        priority=payload.priority,
    )


def index_items(run_id: str, meta: RunMeta, status: RunStatus, *, new: bool = False) -> list[Item]:
    """The run's index entries for ``status`` (and, when ``new``, the status-free ones)."""
    keys = entry_keys(run_id, meta.workflow, meta.started_at, status, new=new)
    return [
        Item(payload=b"", kind=RECORD_KIND, encoding=ENCODING, reference=run_id, dedup_key=key)
        for key in keys
    ]


def attribute_items(
    run_id: str,
    workflow: str,
    started_at: datetime,
    snapshot: AttributesRecord,
    *,
    every: bool = False,
) -> list[Item]:
    """The index entries of the values of ``snapshot`` set by its generation
    (``every``: of all its values, each with the generation that set it)."""
    return [
        Item(payload=b"", kind=RECORD_KIND, encoding=ENCODING, reference=run_id, dedup_key=key)
        for name, value in snapshot.values.items()
        if every or snapshot.since.get(name, 0) == snapshot.gen
        for key in attribute_entry_keys(
            run_id, workflow, started_at, name, value, snapshot.since.get(name, 0)
        )
    ]


def start_items(run_id: str, meta: RunMeta, delay: float = 0.0) -> dict[str, list[Item]]:
    """What starting a run produces: its meta and index entries, its first wake
    (carrying the meta when the run has no deadline), its deadline wake."""
    first = meta.started_at + timedelta(seconds=delay) if delay > 0 else None
    workflow, priority = meta.workflow, meta.priority
    if meta.deadline is None:
        wakes = [
            wake_item(
                run_id, "start", first, meta, meta.trace, workflow=workflow, priority=priority
            )
        ]
    else:
        wakes = [
            wake_item(
                run_id, "start", first, trace=meta.trace, workflow=workflow, priority=priority
            ),
            wake_item(run_id, "deadline", meta.deadline, trace=meta.trace, workflow=workflow),
        ]
    records = [record_item(meta_key(run_id), meta, run_id)]
    records += index_items(run_id, meta, "running", new=True)
    start = AttributesRecord(gen=0, values=meta.attributes)
    records += attribute_items(run_id, meta.workflow, meta.started_at, start)
    return {RESULTS_QUEUE: records, meta.queue: wakes}


TRACEBACK_LIMIT = 8192
"""Characters of a failure's traceback kept with its record (the end: the frames
nearest the error)."""


def error_info(error: BaseException, with_traceback: bool = False) -> ErrorInfo:
    """How ``error`` is stored (with its formatted traceback, bounded, if asked)."""
    text = None
    if with_traceback and error.__traceback__ is not None:
        text = "".join(traceback.format_exception(error))[-TRACEBACK_LIMIT:]
    return ErrorInfo(type=type(error).__qualname__, message=str(error), traceback=text)
