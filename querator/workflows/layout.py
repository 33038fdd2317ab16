"""How a run is laid out in queue items: keys, kinds and payload models.

- results queue (``querator.results``, never leased): permanent records keyed
  by ``dedup_key``: ``{run}/meta``, ``{run}/{position}`` (one per step call),
  ``{run}/result``.
- workflow queue: wake tasks (kind ``querator.wake``) — "replay this run".
- step queue: step items (kind ``querator.step``), ``dedup_key``
  ``{run}/{position}/step`` (``{run}/{position}/step/d{n}`` after the n-th deferral).
- results queue: ``{run}/cancel`` once cancellation was asked for.
- results queue: ``{run}/{position}/progress/a`` and ``/b``: a step's last
  progress report (the newer of the two; reports alternate between them).
- results queue: ``{run}/resume``: a resume request, until a worker carries it out.
- results queue: ``index/...``: the run index's entries (empty payloads), see
  :mod:`querator.workflows.run_index`.
- sagas, results queue: ``{run}/compensating`` (reason and plan), ``{run}/c{k}``
  (compensation records, ``{run}/c{k}/r{round}`` after re-drives),
  ``{run}/cfailed/{g}``, ``{run}/redrive/{g}``, ``{run}/aborted``; compensation
  items are step items keyed ``{run}/c{k}[/r{round}]/step``.

Fields are only ever added, with defaults, so old records keep their meaning,
and readers ignore fields they do not know, so a worker of the previous version
reads what a newer one wrote (a rolling deploy).
"""

from __future__ import annotations

import hashlib
import re
import traceback
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, Field

from querator.clock import stamp
from querator.queue.models import Item, QueueSettings
from querator.queue.record_store import Versioned
from querator.queue.validation import MAX_DURATION
from querator.records import StoredModel
from querator.workflows.run_index import entry_keys

RESULTS_QUEUE = "querator.results"
"""Where run records live."""
WORKFLOW_QUEUE = "querator.workflows"
"""Default queue of wake tasks (and of steps without a queue of their own)."""
WAKE_KIND = "querator.wake"
"""Kind of wake tasks: ``querator.wake:{workflow}`` (see :func:`wake_kind`); bare,
the kind of wake tasks written before routing (see :mod:`..engine.rerouting`)."""
STEP_KIND = "querator.step"
"""Kind of step items: ``querator.step:{step}`` (see :func:`step_kind`); bare, the
kind of step items written before routing."""
RECORD_KIND = "querator.record"
ENCODING = "json"
SLEEP_STEP = "querator.sleep"
"""The step name stored in the record of a durable timer."""

RunStatus = Literal[
    "running",
    "completed",
    "failed",
    "cancelled",
    "compensating",
    "compensated",
    "compensation_failed",
]
"""What :meth:`RunHandle.status` reports (the last three for sagas only)."""

RESULTS_SETTINGS = QueueSettings(lease_timeout=60.0, expire_timeout=MAX_DURATION)
"""Records are kept for the longest time a queue allows (366 days)."""
WORK_LEASE = 10.0
"""Seconds a worker holds a wake task or step item without renewing it, in the
queues querator creates: a step is renewed every third of it while it runs,
so a worker that dies is replaced within about this long (the failover time)."""
DEAD_QUEUE = "querator.dead"
"""Where items of the workflow and step queues querator creates go when they
cannot be handled (undecodable, unknown kind, a run with no meta): kept for a
user to see (``querator dead list QUEUE``) and re-drive, never dropped."""
DEAD_SETTINGS = QueueSettings()
"""Settings of :data:`DEAD_QUEUE`: the default expiry, so its dead letters are
kept until requeued or purged (a dead queue with the default ``expire_timeout``
never expires its items)."""
WORK_SETTINGS = QueueSettings(
    lease_timeout=WORK_LEASE, expire_timeout=MAX_DURATION, dead_queue=DEAD_QUEUE
)
"""Settings of workflow and step queues created by querator (existing ones are kept)."""


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

    def final_status(self) -> RunStatus:
        """The status this record ends the run with."""
        if self.status is not None:
            return self.status
        if self.cancelled:
            return "cancelled"
        return "completed" if self.ok else "failed"


class ProgressRecord(StoredModel, Versioned):
    """``{run}/{position}/progress``: the last progress a step call reported (a
    record of :data:`querator.workflows.progress.PROGRESS`)."""

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
    :func:`querator.workflows.engine.replay.started`)."""


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


RESUME_TAG = "resume"
"""The tag of the wake task a resume request comes with (``{run}/wake/resume``)."""


def resume_key(run_id: str) -> str:
    return f"{run_id}/resume"


def new_run_id(idempotency_key: str | None) -> str:
    """A fresh run id, or the one derived from ``idempotency_key``."""
    if idempotency_key is None:
        return f"run-{uuid.uuid4().hex}"
    return "run-" + hashlib.sha256(idempotency_key.encode()).hexdigest()[:32]


def child_run_id(parent: str, position: int) -> str:
    """The run id of the child workflow started at ``position`` of run ``parent``."""
    return "run-" + hashlib.sha256(f"child:{parent}/{position}".encode()).hexdigest()[:32]


def cancel_key(run_id: str) -> str:
    return f"{run_id}/cancel"


def meta_key(run_id: str) -> str:
    return f"{run_id}/meta"


def step_key(run_id: str, position: int) -> str:
    return f"{run_id}/{position}"


PROGRESS_SLOTS = ("a", "b")
"""A step's progress alternates between two records, so a reader always finds one."""


def progress_key(run_id: str, position: int, slot: str) -> str:
    return f"{run_id}/{position}/progress/{slot}"


_UNAWAITED_RECORD = re.compile(r"[^/]+/\d+(/progress/[ab])?")
"""Keys of a step call's record and of its progress: nobody waits for those."""


def awaited_record(key: str) -> bool:
    """Whether a ``result()`` call may be waiting for the record ``key``: every
    record but a step call's own and its progress (a run's result, a saga's
    compensation records, cancel requests, ...), so writing it wakes the
    results queue's watchers."""
    return _UNAWAITED_RECORD.fullmatch(key) is None


def result_key(run_id: str) -> str:
    return f"{run_id}/result"


def aborted_key(run_id: str) -> str:
    """A saga being aborted (timeout) waits for its running steps: new attempts are skipped."""
    return f"{run_id}/aborted"


def compensating_key(run_id: str) -> str:
    return f"{run_id}/compensating"


def compensation_slot(index: int, round_: int) -> str:
    """Record key suffix of compensation ``index`` at re-drive ``round_``."""
    return f"c{index}" if round_ == 0 else f"c{index}/r{round_}"


def cfailed_key(run_id: str, g: int) -> str:
    return f"{run_id}/cfailed/{g}"


def redrive_key(run_id: str, g: int) -> str:
    return f"{run_id}/redrive/{g}"


def record_item(key: str, record: BaseModel, run_id: str) -> Item:
    """A results-queue item holding ``record`` under ``key``."""
    return Item(
        payload=record.model_dump_json().encode(),
        kind=RECORD_KIND,
        encoding=ENCODING,
        reference=run_id,
        dedup_key=key,
    )


def wake_kind(workflow: str) -> str:
    """The kind of the wake tasks of ``workflow``'s runs (bare when not known)."""
    return _routed(WAKE_KIND, workflow) if workflow else WAKE_KIND


def step_kind(step: str) -> str:
    """The kind of the items that run step (or compensation) ``step``."""
    return _routed(STEP_KIND, step)


def _routed(prefix: str, name: str) -> str:
    """``{prefix}:{name}``; a name too long for a kind (512 characters) is
    replaced by its SHA-256 (``{prefix}:#{hex}``), the same in every process."""
    kind = f"{prefix}:{name}"
    if len(kind) <= 512:
        return kind
    return f"{prefix}:#{hashlib.sha256(name.encode()).hexdigest()}"


def is_wake(kind: str) -> bool:
    """Whether ``kind`` is a wake task's (routed or bare)."""
    return kind.startswith(WAKE_KIND) and kind[len(WAKE_KIND) : len(WAKE_KIND) + 1] in ("", ":")


def is_step(kind: str) -> bool:
    """Whether ``kind`` is a step item's (routed or bare)."""
    return kind.startswith(STEP_KIND) and kind[len(STEP_KIND) : len(STEP_KIND) + 1] in ("", ":")


def routed_name(kind: str) -> str | None:
    """The workflow or step name a routed kind carries (None: a bare kind)."""
    _, colon, name = kind.partition(":")
    return name if colon else None


def wake_item(
    run_id: str,
    tag: str,
    at: datetime | None = None,
    meta: RunMeta | None = None,
    trace: Mapping[str, str] | None = None,
    *,
    workflow: str,
) -> Item:
    """A wake task of a run of ``workflow`` due at ``at`` (None: now).

    ``tag`` (``start``, ``cancel``, ``deadline`` or a position) keeps each
    wakeup distinct; ``meta``: see :attr:`WakePayload.meta`; ``trace``: the
    run's trace context (:attr:`RunMeta.trace`), for the item's headers. Its
    kind names the workflow: only workers that serve it lease it.
    """
    return Item(
        payload=WakePayload(run_id=run_id, meta=meta).model_dump_json().encode(),
        kind=wake_kind(workflow),
        encoding=ENCODING,
        reference=run_id,
        dedup_key=f"{run_id}/wake/{tag}",
        enqueue_at=at,
        headers=dict(trace) if trace else {},
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
    )


def index_items(run_id: str, meta: RunMeta, status: RunStatus, *, new: bool = False) -> list[Item]:
    """The run's index entries for ``status`` (and, when ``new``, the status-free ones)."""
    keys = entry_keys(run_id, meta.workflow, meta.started_at, status, new=new)
    return [
        Item(payload=b"", kind=RECORD_KIND, encoding=ENCODING, reference=run_id, dedup_key=key)
        for key in keys
    ]


def start_items(run_id: str, meta: RunMeta, delay: float = 0.0) -> dict[str, list[Item]]:
    """What starting a run produces: its meta and index entries, its first wake
    (carrying the meta when the run has no deadline), its deadline wake."""
    first = meta.started_at + timedelta(seconds=delay) if delay > 0 else None
    workflow = meta.workflow
    if meta.deadline is None:
        wakes = [wake_item(run_id, "start", first, meta, meta.trace, workflow=workflow)]
    else:
        wakes = [
            wake_item(run_id, "start", first, trace=meta.trace, workflow=workflow),
            wake_item(run_id, "deadline", meta.deadline, trace=meta.trace, workflow=workflow),
        ]
    records = [record_item(meta_key(run_id), meta, run_id)]
    records += index_items(run_id, meta, "running", new=True)
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
