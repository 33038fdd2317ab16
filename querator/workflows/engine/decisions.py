"""The engine's decisions, pure (no I/O): how a run ends, what resumes a parked
body, which runs a saga's replay must advance."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from querator.queue.models import Leased
from querator.workflows.engine.context import (
    Child,
    Gather,
    Request,
    Sleep,
    StepCall,
    waited_positions,
)
from querator.workflows.engine.fiber import Finished
from querator.workflows.engine.history import History
from querator.workflows.engine.live import LiveRun
from querator.workflows.errors import WorkflowCancelled, WorkflowTimeout
from querator.workflows.functions import WorkflowFunction
from querator.workflows.keys import SLEEP_STEP
from querator.workflows.sagas.core import SagaFunction
from querator.workflows.stored import ErrorInfo, RunRecord, error_info

__all__ = [
    "ended_early",
    "ending",
    "finished_record",
    "needs_saga_path",
    "resumes_on",
    "satisfied",
    "tag_position",
    "timed_out",
    "timer_ended",
]


def finished_record(wf: WorkflowFunction[..., Any], finished: Finished) -> RunRecord:
    """The final record of a body that ended."""
    error: Exception | None = finished.error
    if error is None:
        try:
            return RunRecord(ok=True, result=wf.codec.encode_result(finished.value))
        except Exception as exc:
            error = exc
    return RunRecord(ok=False, error=error_info(error, with_traceback=True))


def ended_early(run_id: str, history: History, now: datetime) -> RunRecord | None:
    """The final record of a cancelled or timed-out run (None: it goes on)."""
    if history.cancel is not None:
        # The stored message is the reason alone: result() raises WorkflowCancelled with it.
        error = ErrorInfo(type=WorkflowCancelled.__qualname__, message=history.cancel.reason)
        return RunRecord(ok=False, error=error, cancelled=True)
    assert history.meta is not None
    return timed_out(run_id, history.meta.deadline, now)


def timed_out(run_id: str, deadline: datetime | None, now: datetime) -> RunRecord | None:
    """The final record of a run past its deadline (None: not past it)."""
    if deadline is not None and now >= deadline:
        timeout = WorkflowTimeout(f"run {run_id} timed out at {deadline.isoformat()}")
        return RunRecord(ok=False, error=error_info(timeout))
    return None


def ending(live: LiveRun, message: Request | Finished | RunRecord) -> tuple[bool, RunRecord | None]:
    """(True, None) when a saga must now be advanced from what is stored (its
    body failed, or it passed its deadline); else the run's final record if
    it ends now (None: it goes on). ``message``: what the body asked, or the
    final record of a run that timed out before it was resumed."""
    ctx, wf = live.ctx, live.wf
    is_saga = isinstance(wf, SagaFunction)
    if isinstance(message, RunRecord):
        if is_saga:
            return True, None
        final: RunRecord | None = message
    elif ctx.fatal is not None:
        final = RunRecord(ok=False, error=error_info(ctx.fatal))
    elif isinstance(message, Finished):
        final = finished_record(wf, message)
        if is_saga and not final.ok:
            return True, None
    else:
        final = timed_out(live.run_id, live.meta.deadline, ctx.clock.now())
        if final is not None and is_saga:
            return True, None
    if final is not None and is_saga:
        final = final.model_copy(update={"saga": True})
    return False, final


def resumes_on(live: LiveRun, request: Request | Finished | None, position: int) -> bool:
    """Whether the record at ``position`` is all ``request`` still waits for."""
    if isinstance(request, StepCall | Child):
        return waited_positions(request) == [position]
    if isinstance(request, Gather):
        others = [p for p in waited_positions(request) if p != position]
        return len(others) < len(waited_positions(request)) and all(
            p in live.ctx.records for p in others
        )
    return False


def satisfied(live: LiveRun, request: Request) -> bool:
    """Whether ``request`` has what it waits for."""
    if isinstance(request, Sleep):
        return live.ctx.clock.now() >= request.until
    return all(p in live.ctx.records for p in waited_positions(request))


def needs_saga_path(wf: WorkflowFunction[..., Any], history: History, now: datetime) -> bool:
    """A saga compensating, cancelled or past its deadline (at ``now``) is advanced by replay."""
    if not isinstance(wf, SagaFunction):
        return False
    return history.compensating or ended_early("", history, now) is not None


@dataclass(frozen=True)
class TimerEnd:
    """A durable timer a wake ends: stored at ``since``, due at ``until``."""

    position: int
    since: datetime
    until: datetime


def timer_ended(wake: Leased, history: History, now: datetime) -> TimerEnd | None:
    """The durable timer ``wake`` ends now (its tag names the timer's position,
    whose record is a sleep that is due), else None."""
    tag = (wake.dedup_key or "").removesuffix("/r").rpartition("/")[2]
    if not tag.isdigit():
        return None
    record = history.records.get(int(tag))
    if record is None or record.step != SLEEP_STEP or record.until is None:
        return None
    if record.until > now:
        return None
    return TimerEnd(int(tag), record.finished_at, record.until)


def tag_position(wake: Leased) -> int:
    """The position a wake task names (its dedup key's tag), else 0."""
    tag = (wake.dedup_key or "").removesuffix("/r").rpartition("/")[2]
    return int(tag) if tag.isdigit() else 0
