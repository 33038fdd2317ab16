"""What inspecting runs returns: :class:`RunInfo` with its :class:`StepInfo`
calls and :class:`StepProgress` (read by :mod:`querator.workflows.inspection`,
which re-exports them)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field, model_validator

from querator.model_bases import View
from querator.workflows.attributes import AttributeValue
from querator.workflows.run_detail import (
    CompensationInfo,
    PendingStep,
    UnreadMessages,
    WaitInfo,
)
from querator.workflows.runs import RunStatus
from querator.workflows.stored import ParentClosePolicy

__all__ = ["ChildInfo", "RunInfo", "StepInfo", "StepProgress"]


class StepProgress(View):
    """The last progress a step call reported (``report_progress``)."""

    position: int
    attempt: int
    """The attempt that reported it."""
    updated_at: datetime
    progress: dict[str, Any]


class StepInfo(View):
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
    until: datetime | None = None
    """A durable timer (step ``querator.sleep``): the instant it ends."""
    started_at: datetime | None = None
    """When the last attempt began (None: not an attempt, or not recorded)."""
    worker: str | None = None
    """The client id of the worker that ran the last attempt."""


class ChildInfo(View):
    """A child run the run started (``child(...)`` or ``child.spawn(...)``)."""

    run_id: str
    workflow: str
    position: int
    """The position of the call or spawn in the parent's body."""
    parent_close_policy: ParentClosePolicy
    """What the parent's end does to the child while it runs."""
    status: RunStatus | None = None
    """The child's status (None: its records are gone, purged)."""


class RunInfo(View):
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
    continued_as: str | None = None
    """The run it continued as (``continue_as_new``), once it ended so."""
    continued_from: str | None = None
    """The run that continued as this one."""
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)
    """The run's search attributes now (``start(attributes=...)``, ``set_attributes``)."""
    steps: tuple[StepInfo, ...] = ()
    """The step calls that ended, by position (empty in :func:`list_runs`)."""
    progress: tuple[StepProgress, ...] = ()
    """The last progress reports of the step calls without an outcome yet, by
    position (empty in :func:`list_runs`); the calls themselves are
    :attr:`pending`."""
    in_progress: tuple[StepProgress, ...] = Field(
        default=(),
        deprecated="RunInfo.in_progress is deprecated: use RunInfo.progress "
        "(the calls not ended are RunInfo.pending)",
    )
    """Deprecated alias of :attr:`progress` (kept in JSON for older readers)."""
    pending: tuple[PendingStep, ...] = ()
    """Step calls (and compensations) whose items wait or run, with the step's
    name and its lease (empty in :func:`list_runs` and once the run ended)."""
    compensations: tuple[CompensationInfo, ...] = ()
    """A saga's compensations, planned or run, in their order (empty in
    :func:`list_runs`)."""
    children: tuple[ChildInfo, ...] = ()
    """The child runs it started, by position (empty in :func:`list_runs`)."""
    waits: tuple[WaitInfo, ...] = ()
    """What the running run waits for now, by position: a timer, a message, an
    event, a child run, its step calls (or their limits). Empty in
    :func:`list_runs` and once the run ended."""
    unread: tuple[UnreadMessages, ...] = ()
    """The messages sent to the run that no ``recv`` read, by topic: how many
    and since when (empty in :func:`list_runs`). A finished run's unread
    messages are kept until its messages are pruned."""
    unread_more: bool = False
    """The run has more messages (read or not) than :func:`get_run` reads
    (:data:`~querator.workflows.run_detail.UNREAD_SCAN`): :attr:`unread`
    counts those read only."""
    waiting_for: tuple[str, ...] = ()
    """What the run waits for that no live worker serves, in words (``no worker
    serving step 'x' on queue 'q' has polled for 3m``): its due items stay in
    their queues until such a worker polls (empty in :func:`list_runs`, and
    while every due item of the run has a live worker)."""

    @model_validator(mode="before")
    @classmethod
    def _alias_progress(cls, data: Any) -> Any:
        """``progress`` and its deprecated alias ``in_progress`` hold one value,
        whichever of the two the data (an older server's JSON) has."""
        if isinstance(data, dict):
            value = data.get("progress") or data.get("in_progress") or ()
            data = {**data, "progress": value, "in_progress": value}
        return data
