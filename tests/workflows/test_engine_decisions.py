"""The engine's decisions alone, table-driven: no store, no worker, no body run.

Each row builds a run's body over an in-memory history (never started), asks
one decision of :mod:`querator.workflows.engine.decisions` for the next move
and compares a short description of the move with the one expected.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from querator import saga, workflow
from querator.clock import ManualClock
from querator.workflows.engine.context import Child, Gather, Request, Sleep, StepCall
from querator.workflows.engine.decisions import (
    Compensate,
    End,
    Hold,
    Move,
    Park,
    Resume,
    Stored,
    WakeRun,
    after_record,
    from_history,
    next_move,
    woken,
)
from querator.workflows.engine.fiber import Finished
from querator.workflows.engine.history import EVERYTHING, History
from querator.workflows.engine.live import LiveRun
from querator.workflows.engine.replay import new_live
from querator.workflows.errors import NonDeterminism
from querator.workflows.keys import is_wake
from querator.workflows.stored import (
    CancelRecord,
    ErrorInfo,
    RunMeta,
    RunRecord,
    StepPayload,
    StepRecord,
)

ARGS = "[[], {}]"
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(minutes=5)
EARLIER = NOW - timedelta(minutes=5)


@workflow(name="t.decisions_flow")
def flow() -> str:
    return "done"


@saga(name="t.decisions_saga")
def trip() -> str:
    return "booked"


@dataclass
class Run:
    """A run's stored state, for one row."""

    saga: bool = False
    deadline: datetime | None = None
    records: tuple[int, ...] = ()
    """Positions holding an ok step record."""
    cancelled: bool = False
    compensating: bool = False
    fatal: bool = False
    parked: Request | None = None
    """The request the live body parked on (committed); None: replayed, not committed."""

    def history(self) -> History:
        wf = trip if self.saga else flow
        meta = RunMeta(
            workflow=wf.name,
            args=ARGS,
            queue="wq",
            started_at=EARLIER,
            deadline=self.deadline,
        )
        records = {p: record() for p in self.records}
        cancel = CancelRecord(reason="asked") if self.cancelled else None
        return History(
            meta, records, None, cancel, known=EVERYTHING, compensating=self.compensating
        )

    def live(self) -> LiveRun:
        wf = trip if self.saga else flow
        live = new_live("r1", wf, self.history(), ManualClock(NOW))
        live.request = self.parked
        if self.fatal:
            live.ctx.fatal = NonDeterminism(0, "t.s", "t.other")
        return live


def record(ok: bool = True) -> StepRecord:
    return StepRecord(step="t.s", ok=ok, result="1" if ok else None, attempts=1)


def payload(position: int) -> StepPayload:
    return StepPayload(
        run_id="r1",
        position=position,
        step="t.s",
        args=ARGS,
        workflow_queue="wq",
        workflow="t.decisions_flow",
    )


STEP = StepCall("sq", payload(0))
GATHER = Gather((("sq", payload(0)), ("sq", payload(1))), dispatch=True)
NAP = Sleep(0, LATER, new=True)
DUE = Sleep(0, EARLIER, new=False)
CHILD = Child(
    0, "r1/c0", RunMeta(workflow="t.decisions_flow", args=ARGS, queue="wq", started_at=NOW)
)
FAILED = Finished(error=ValueError("no"))
TIMEOUT = RunRecord(ok=False, error=ErrorInfo(type="WorkflowTimeout", message="late"))


def describe(move: Move) -> str:
    """A move in a few words: its kind and what decides it."""
    if isinstance(move, Hold):
        assert all(is_wake(i.kind) for items in move.produce.values() for i in items)
        tags = [
            queue + ":" + (item.dedup_key or "").rpartition("/")[2]
            for queue, items in move.produce.items()
            for item in items
        ]
        return f"Hold {tags}"
    if isinstance(move, End):
        error = move.final.error.type if move.final.error else "-"
        saga_ = " saga" if move.final.saga else ""
        return f"End {move.final.final_status()}{saga_} {error}"
    if isinstance(move, Compensate):
        return "Compensate loaded" if move.history is not None else "Compensate load"
    if isinstance(move, Park):
        return f"Park {type(move.request).__name__}"
    if isinstance(move, WakeRun):
        return f"WakeRun {move.payload.position}"
    assert isinstance(move, Resume | Stored)
    return type(move).__name__


# -- next_move: what the body's answer commits -------------------------------------

NEXT = [
    ("returned", Run(), Finished("done"), False, "End completed -"),
    ("raised", Run(), Finished(error=ValueError("no")), True, "End failed ValueError"),
    ("diverged", Run(fatal=True), Finished("done"), False, "End failed NonDeterminism"),
    ("late, before resuming", Run(), TIMEOUT, True, "End failed WorkflowTimeout"),
    ("asks a step", Run(), STEP, True, "Park StepCall"),
    ("asks a gather", Run(), GATHER, False, "Park Gather"),
    ("asks a timer", Run(), NAP, False, "Park Sleep"),
    ("asks a child", Run(), CHILD, False, "Park Child"),
    ("asks past its deadline", Run(deadline=EARLIER), STEP, True, "End failed WorkflowTimeout"),
    ("asks before its deadline", Run(deadline=LATER), STEP, True, "Park StepCall"),
    ("saga returned", Run(saga=True), Finished("ok"), True, "End completed saga -"),
    (
        "saga raised, record in hand",
        Run(saga=True),
        Finished(error=ValueError()),
        True,
        "Hold ['wq:saga']",
    ),
    ("saga raised", Run(saga=True), Finished(error=ValueError()), False, "Compensate load"),
    ("saga late, record in hand", Run(saga=True), TIMEOUT, True, "Hold ['wq:saga']"),
    ("saga late", Run(saga=True), TIMEOUT, False, "Compensate load"),
    ("saga asks past deadline", Run(saga=True, deadline=EARLIER), STEP, False, "Compensate load"),
    ("saga asks a step", Run(saga=True), STEP, True, "Park StepCall"),
]


@pytest.mark.parametrize(
    ("run", "message", "carrying", "expected"),
    [row[1:] for row in NEXT],
    ids=[row[0] for row in NEXT],
)
def test_next_move(
    run: Run, message: Request | Finished | RunRecord, carrying: bool, expected: str
) -> None:
    assert describe(next_move(run.live(), message, carrying)) == expected


# -- after_record: a step's record in hand ----------------------------------------

AFTER = [
    ("no body here", None, None, 0, False, "WakeRun 0"),
    ("its step", Run(parked=STEP), None, 0, False, "Resume"),
    ("another step", Run(parked=STEP), None, 3, False, "WakeRun 3"),
    ("its step, stopped", Run(parked=STEP), None, 0, True, "WakeRun 0"),
    ("a gather member, one missing", Run(parked=GATHER), None, 0, False, "WakeRun 0"),
    ("the last gather member", Run(parked=GATHER, records=(1,)), None, 0, False, "Resume"),
    ("a child", Run(parked=CHILD), None, 0, False, "Resume"),
    ("a timer waits for no record", Run(parked=NAP), None, 0, False, "WakeRun 0"),
    ("replayed onto its step", Run(), STEP, 0, False, "Resume"),
    ("replayed to its end", Run(), Finished("done"), 0, False, "WakeRun 0"),
]


@pytest.mark.parametrize(
    ("run", "replayed", "position", "stopped", "expected"),
    [row[1:] for row in AFTER],
    ids=[row[0] for row in AFTER],
)
def test_after_record(
    run: Run | None,
    replayed: Request | Finished | None,
    position: int,
    stopped: bool,
    expected: str,
) -> None:
    live = run.live() if run is not None else None
    request = replayed if replayed is not None else (live.request if live else None)
    outcome = record()
    move = after_record(live, request, payload(position), outcome, stopped)
    assert describe(move) == expected
    if isinstance(move, WakeRun):  # a parked body keeps the record once the wake commits
        assert move.record is outcome


# -- woken: a wake for a live body --------------------------------------------------

WOKEN = [
    ("its step is there", Run(parked=STEP, records=(0,)), False, "Resume"),
    ("its step is not", Run(parked=STEP), False, "Hold []"),
    ("one gather member missing", Run(parked=GATHER, records=(0,)), False, "Hold []"),
    ("every gather member", Run(parked=GATHER, records=(0, 1)), False, "Resume"),
    ("a timer due", Run(parked=DUE), False, "Resume"),
    ("a timer early", Run(parked=NAP), False, "Hold ['wq:0']"),
    ("ended meanwhile", Run(parked=STEP, records=(0,)), True, "Stored"),
    ("past its deadline", Run(parked=STEP, records=(0,), deadline=EARLIER), False, "Stored"),
]


@pytest.mark.parametrize(
    ("run", "ended", "expected"), [row[1:] for row in WOKEN], ids=[row[0] for row in WOKEN]
)
def test_woken(run: Run, ended: bool, expected: str) -> None:
    live = run.live()
    assert live.request is not None
    assert describe(woken(live, live.request, ended, NOW)) == expected


# -- from_history: a run not live here ---------------------------------------------

HISTORY = [
    ("goes on", Run(), "Resume"),
    ("cancelled", Run(cancelled=True), "End cancelled WorkflowCancelled"),
    ("past its deadline", Run(deadline=EARLIER), "End failed WorkflowTimeout"),
    ("before its deadline", Run(deadline=LATER), "Resume"),
    ("saga goes on", Run(saga=True), "Resume"),
    ("saga cancelled", Run(saga=True, cancelled=True), "Compensate loaded"),
    ("saga past its deadline", Run(saga=True, deadline=EARLIER), "Compensate loaded"),
    ("saga compensating", Run(saga=True, compensating=True), "Compensate loaded"),
]


@pytest.mark.parametrize(
    ("run", "expected"), [row[1:] for row in HISTORY], ids=[row[0] for row in HISTORY]
)
def test_from_history(run: Run, expected: str) -> None:
    wf = trip if run.saga else flow
    move = from_history("r1", wf, run.history(), NOW)
    assert describe(move) == expected
    if isinstance(move, End) and move.final.cancelled:  # the reason alone: result() raises it
        assert move.final.error is not None and move.final.error.message == "asked"
