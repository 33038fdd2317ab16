"""The engine's decisions, pure (no I/O): how a run ends, what resumes a parked
body, which runs a saga's replay must advance.

Each decision the engine (:mod:`.driver`) takes returns its next move as a
value: one of the commits below (:data:`Commit`), carried out in one place
(``Engine._commit``), or :class:`Resume` / :class:`Stored`. The engine
gathers the facts (lookups, a replay) first and commits after; nothing here
reads or writes the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from querator.errors import UsageError
from querator.queue.models import Leased
from querator.workflows.engine.commit import Produce
from querator.workflows.engine.context import (
    Child,
    Gather,
    Recv,
    Request,
    Sleep,
    StepCall,
    WaitEvent,
    waited_positions,
)
from querator.workflows.engine.fiber import Finished
from querator.workflows.engine.history import History
from querator.workflows.engine.live import LiveRun
from querator.workflows.engine.mailbox import recv_record
from querator.workflows.engine.successor import ContinueAsNew, successor_id
from querator.workflows.errors import WorkflowCancelled, WorkflowTimeout
from querator.workflows.functions import WorkflowFunction
from querator.workflows.keys import SLEEP_STEP
from querator.workflows.sagas.core import SagaFunction
from querator.workflows.stored import (
    ErrorInfo,
    RunMeta,
    RunRecord,
    StepPayload,
    StepRecord,
    error_info,
    wake_item,
)

__all__ = [
    "Commit",
    "Compensate",
    "End",
    "Hold",
    "Move",
    "Park",
    "Resume",
    "Stored",
    "WakeRun",
    "after_record",
    "ended_early",
    "ending",
    "finished_record",
    "from_history",
    "needs_saga_path",
    "next_move",
    "received",
    "resumes_on",
    "satisfied",
    "tag_position",
    "timed_out",
    "timer_ended",
    "woken",
]

# -- the moves ---------------------------------------------------------------------
# Each commit completes the item in hand, with the records it carries (a step's
# record), in the transaction that produces what the move names.


@dataclass(frozen=True)
class Hold:
    """Complete the item in hand with ``produce``; the run waits as it is."""

    produce: Produce = field(default_factory=dict)


@dataclass(frozen=True)
class WakeRun:
    """Complete the step item in hand with a wake task for its run: whoever leases
    the wake decides from what is committed then. ``record``: the step's record,
    which the run's parked body (if it waits for it) keeps once committed."""

    payload: StepPayload
    record: StepRecord | None = None


@dataclass(frozen=True)
class End:
    """The run ends with ``final``."""

    run_id: str
    meta: RunMeta
    final: RunRecord


@dataclass(frozen=True)
class Compensate:
    """A saga that failed, is cancelled, timed out or compensating goes on by
    replay (:mod:`..sagas.advance`) from ``history`` (None: load it, from
    ``position``)."""

    run_id: str
    wf: WorkflowFunction[..., Any]
    history: History | None = None
    position: int = 0


@dataclass(frozen=True)
class Park:
    """Commit ``request``'s items (a step item maybe leased to this worker) and
    keep the body parked on it."""

    request: Request


@dataclass(frozen=True)
class Resume:
    """Resume the body: what it waits for is there (nothing to commit yet)."""


@dataclass(frozen=True)
class Stored:
    """Drop the live body and decide from what is stored (the run ended, is
    cancelled, compensating or past its deadline)."""


Commit = Hold | WakeRun | End | Compensate | Park
"""A move the engine commits."""

Move = Commit | Resume | Stored
"""Any next move."""


# -- the decisions -------------------------------------------------------------------


def _continued(wf: WorkflowFunction[..., Any], asked: ContinueAsNew, run_id: str) -> RunRecord:
    """The final record of run ``run_id`` that continues as new as ``asked``."""
    try:
        if isinstance(wf, SagaFunction):
            raise UsageError("continue_as_new() is not supported in a @saga")
        args = wf.codec.encode_args(asked.args, asked.kwargs)
    except Exception as exc:
        return RunRecord(ok=False, error=error_info(exc, with_traceback=True))
    return RunRecord(
        ok=True,
        result="null",
        continued_as=successor_id(run_id),
        continued_args=args,
        continued_attributes=asked.attributes,
    )


def finished_record(
    wf: WorkflowFunction[..., Any], finished: Finished, run_id: str = ""
) -> RunRecord:
    """The final record of a body that ended (or continued as new)."""
    error: Exception | None = finished.error
    if error is None and isinstance(finished.value, ContinueAsNew):
        return _continued(wf, finished.value, run_id)
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
        final = finished_record(wf, message, live.run_id)
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


def satisfied(live: LiveRun, request: Request, now: datetime) -> bool:
    """Whether ``request`` has what it waits for at ``now``."""
    if isinstance(request, Sleep):
        return now >= request.until
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


def next_move(
    live: LiveRun, message: Request | Finished | RunRecord, carrying: bool
) -> Hold | End | Compensate | Park:
    """What to commit once the body answered ``message`` (or timed out: its final
    record). ``carrying``: the item in hand stores a step's record, which a saga
    stores first, with a wake that compensates. Any move but :class:`Park` ends
    the body's life here."""
    to_saga, final = ending(live, message)
    if to_saga:
        if not carrying:
            return Compensate(live.run_id, live.wf, None, live.ctx.position)
        meta = live.meta
        saga = wake_item(live.run_id, "saga", trace=meta.trace, workflow=meta.workflow)
        return Hold({live.ctx.workflow_queue: [saga]})
    if final is not None:
        return End(live.run_id, live.meta, final)
    assert not isinstance(message, Finished | RunRecord)
    return Park(message)


def after_record(
    live: LiveRun | None,
    request: Request | Finished | None,
    payload: StepPayload,
    record: StepRecord,
    stopped: bool,
) -> Resume | WakeRun:
    """With a step's ``record`` in hand: resume the body (``live``, parked on
    ``request``) when the record is all it waits for and the run was not
    ``stopped`` meanwhile (see ``Engine._stopped``); else wake the run."""
    if live is not None and not stopped and resumes_on(live, request, payload.position):
        return Resume()
    return WakeRun(payload, record)


def woken(live: LiveRun, request: Request, ended: bool, now: datetime) -> Stored | Resume | Hold:
    """A wake for the live body parked on ``request`` (its records found added):
    from what is stored when the run ``ended`` (or is cancelled, compensating, or
    past its deadline at ``now``); resume it when it has what it waits for; else
    leave it parked (a recv is resumed: it asks again, and the engine looks
    for its message; a wake for another member, or one that came early: a timer's
    wake is produced again, a no-op but for an early wake)."""
    if ended or timed_out(live.run_id, live.meta.deadline, now) is not None:
        return Stored()
    if isinstance(request, Recv | WaitEvent) or satisfied(live, request, now):
        # A recv (a wait for an event) asks again once resumed; the engine then
        # looks for a message (the event).
        return Resume()
    if not isinstance(request, Sleep):
        return Hold()
    meta = live.meta
    again = wake_item(
        live.run_id, str(request.position), request.until, trace=meta.trace, workflow=meta.workflow
    )
    return Hold({live.ctx.workflow_queue: [again]})


def received(
    request: Recv, message: tuple[str, str] | None, timer_fired: bool, now: datetime
) -> StepRecord | None:
    """The record a body parked on ``request`` reads: the oldest unread
    ``message`` (key, value as JSON) when there is one, else a timeout once
    ``request``'s timer fired (its wake is in hand) or its instant passed;
    None: it waits."""
    if message is not None:
        return recv_record(*message)
    if timer_fired or (request.until is not None and now >= request.until):
        return recv_record(None, None)
    return None


def from_history(
    run_id: str, wf: WorkflowFunction[..., Any], history: History, now: datetime
) -> Compensate | End | Resume:
    """A run not live here, from what is stored (not finished, its meta there):
    a saga's replay advances it, it ends early, or its body is replayed and resumed."""
    assert history.meta is not None
    if needs_saga_path(wf, history, now):
        return Compensate(run_id, wf, history)
    final = ended_early(run_id, history, now)
    return Resume() if final is None else End(run_id, history.meta, final)
