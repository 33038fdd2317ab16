"""How a run is laid out in queue items: keys, kinds and payload models.

- results queue (``querator.results``, never leased): permanent records keyed
  by ``dedup_key``: ``{run}/meta``, ``{run}/{position}`` (one per step call),
  ``{run}/result``.
- workflow queue: wake tasks (kind ``querator.wake``) — "replay this run".
- step queue: step items (kind ``querator.step``), ``dedup_key``
  ``{run}/{position}/step``.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field

from querator.queue.models import Item, QueueSettings
from querator.queue.validation import MAX_DURATION

RESULTS_QUEUE = "querator.results"
"""Where run records live."""
WORKFLOW_QUEUE = "querator.workflows"
"""Default queue of wake tasks (and of steps without a queue of their own)."""
WAKE_KIND = "querator.wake"
STEP_KIND = "querator.step"
RECORD_KIND = "querator.record"
ENCODING = "json"
PREFETCH = 32
"""Step records fetched per lookup during replay."""

RESULTS_SETTINGS = QueueSettings(lease_timeout=60.0, expire_timeout=MAX_DURATION)
"""Records are kept for the longest time a queue allows (366 days)."""
WORK_SETTINGS = QueueSettings(lease_timeout=60.0, expire_timeout=MAX_DURATION)
"""Settings of workflow and step queues created by querator (existing ones are kept)."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ErrorInfo(_Model):
    """An exception, as stored."""

    type: str
    message: str


class RunMeta(_Model):
    """``{run}/meta``: what was started."""

    workflow: str
    args: str
    queue: str
    started_at: datetime


class StepRecord(_Model):
    """``{run}/{position}``: how a step call ended."""

    step: str
    ok: bool
    result: str | None = None
    error: ErrorInfo | None = None
    attempts: int = 0
    finished_at: datetime = Field(default_factory=lambda: datetime.now(UTC))


class RunRecord(_Model):
    """``{run}/result``: how the run ended."""

    ok: bool
    result: str | None = None
    error: ErrorInfo | None = None
    finished_at: datetime = Field(default_factory=lambda: datetime.now(UTC))


class WakePayload(_Model):
    """A wake task: replay ``run_id``."""

    run_id: str


class StepPayload(_Model):
    """A step item: run step ``step`` at ``position`` of ``run_id``."""

    run_id: str
    position: int
    step: str
    args: str
    workflow_queue: str


def new_run_id(idempotency_key: str | None) -> str:
    """A fresh run id, or the one derived from ``idempotency_key``."""
    if idempotency_key is None:
        return f"run-{uuid.uuid4().hex}"
    return "run-" + hashlib.sha256(idempotency_key.encode()).hexdigest()[:32]


def meta_key(run_id: str) -> str:
    return f"{run_id}/meta"


def step_key(run_id: str, position: int) -> str:
    return f"{run_id}/{position}"


def result_key(run_id: str) -> str:
    return f"{run_id}/result"


def record_item(key: str, record: BaseModel, run_id: str) -> Item:
    """A results-queue item holding ``record`` under ``key``."""
    return Item(
        payload=record.model_dump_json().encode(),
        kind=RECORD_KIND,
        encoding=ENCODING,
        reference=run_id,
        dedup_key=key,
    )


def wake_item(run_id: str, tag: str) -> Item:
    """A wake task; ``tag`` (``start`` or a position) keeps each wakeup distinct."""
    return Item(
        payload=WakePayload(run_id=run_id).model_dump_json().encode(),
        kind=WAKE_KIND,
        encoding=ENCODING,
        reference=run_id,
        dedup_key=f"{run_id}/wake/{tag}",
    )


def step_item(payload: StepPayload) -> Item:
    """The item that runs one step call."""
    return Item(
        payload=payload.model_dump_json().encode(),
        kind=STEP_KIND,
        encoding=ENCODING,
        reference=payload.run_id,
        dedup_key=f"{payload.run_id}/{payload.position}/step",
    )


def error_info(error: BaseException) -> ErrorInfo:
    """How ``error`` is stored."""
    return ErrorInfo(type=type(error).__qualname__, message=str(error))
