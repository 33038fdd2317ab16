"""``@saga``: a workflow whose failed runs undo their completed steps. Pure, no I/O.

A saga's body calls steps like any workflow's; steps may declare a
compensation (``@reserve_hotel.compensate``). When the body fails (a step
failed for good and the body did not catch it, or the body raised), or the run
is cancelled or times out, the run is *compensated*: the compensations of the
steps that completed run one after another, in reverse order of completion,
each a leased item with its own retry policy. The decisions live here:

- :func:`compensation_plan` fixes, once, which compensations run and in what
  order (stored in ``{run}/compensating``);
- :func:`next_move` reads the compensation records and says what to do next
  (dispatch compensation *k*, report it failed, or end the run);
- :func:`pending_status` is the status of a saga that has not ended.

See docs/sagas.md for the state machine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import ParamSpec, TypeVar, overload

from typing_extensions import Unpack

from querator.errors import InvalidArgument
from querator.queue.options import check_options
from querator.workflows.engine.context import Called
from querator.workflows.functions import WorkflowFunction, WorkflowOptions
from querator.workflows.stored import (
    CompensatingRecord,
    CompensationEntry,
    CompensationFailedRecord,
    ErrorInfo,
    RedriveRecord,
    RunStatus,
    StepRecord,
)

__all__ = [
    "Dispatch",
    "Done",
    "SagaFunction",
    "SagaState",
    "Stuck",
    "compensation_plan",
    "next_move",
    "pending_status",
    "saga",
]

P = ParamSpec("P")
R = TypeVar("R")


class SagaFunction(WorkflowFunction[P, R]):
    """A function decorated with ``@saga``: a workflow whose failure runs the
    compensations of its completed steps, in reverse order of completion."""

    def __repr__(self) -> str:
        return f"<saga {self.name!r}>"


@overload
def saga(fn: Callable[P, R], /) -> SagaFunction[P, R]: ...


@overload
def saga(**options: Unpack[WorkflowOptions]) -> Callable[[Callable[P, R]], SagaFunction[P, R]]: ...


def saga(
    fn: Callable[P, R] | None = None, /, **options: Unpack[WorkflowOptions]
) -> SagaFunction[P, R] | Callable[[Callable[P, R]], SagaFunction[P, R]]:
    """Make ``fn`` a saga: a ``@workflow`` (same options) whose failed runs are compensated.

    When the body raises (typically :class:`StepFailed` of a step that failed
    for good), when the run is cancelled or when it outlives ``timeout``, the
    compensations (``@step_fn.compensate``) of the steps that completed run in
    reverse order of completion; the run ends ``compensated`` (``cancelled``
    when it was cancelled), or stays ``compensation_failed`` if one fails for
    good until :meth:`RunHandle.retry_compensation`. ``result()`` then raises
    :class:`SagaFailed`.
    """

    if "schedule" in options:
        raise InvalidArgument("schedule", "is an option of @workflow, not of @saga")
    check_options("@saga", options, WorkflowOptions)

    def decorate(f: Callable[P, R]) -> SagaFunction[P, R]:
        return SagaFunction(f, **options)

    return decorate(fn) if fn is not None else decorate


def _order_key(position: int, created: Mapping[int, datetime]) -> tuple[datetime, int]:
    """Completion order of a step record: when its record was stored, then its position."""
    return (created[position], position)


def compensation_plan(
    compensable: Mapping[int, Called],
    records: Mapping[int, StepRecord],
    created: Mapping[int, datetime],
    default_queue: str,
) -> tuple[CompensationEntry, ...]:
    """The compensations to run, in the order to run them.

    One per step that completed (or failed, with ``compensate_on_failure``)
    and declares a compensation; none for a step without a record (never
    started, or skipped). Ordered by reverse completion: latest stored record
    first (position breaks ties: sequential steps complete in position order).
    """
    chosen = []
    for position, called in compensable.items():
        record = records.get(position)
        if record is None or not (record.ok or called.undo.on_failure):
            continue
        chosen.append((position, called, record))
    chosen.sort(key=lambda c: _order_key(c[0], created), reverse=True)
    return tuple(
        CompensationEntry(
            position=position,
            step=called.step,
            name=called.undo.name,
            queue=called.undo.queue or default_queue,
            args=called.undo.encode(
                called.args, called.kwargs, record.result if record.ok else None
            ),
        )
        for position, called, record in chosen
    )


@dataclass(frozen=True)
class SagaState:
    """What is stored about a saga's compensation (``{run}/compensating`` and after)."""

    compensating: CompensatingRecord
    records: dict[int, StepRecord] = field(default_factory=dict)
    """Compensation ``k``'s record at its current round (absent: not ended yet)."""
    failed: dict[int, CompensationFailedRecord] = field(default_factory=dict)
    """``{run}/cfailed/{g}`` records by ``g``."""
    redrives: dict[int, RedriveRecord] = field(default_factory=dict)
    """``{run}/redrive/{g}`` records by ``g`` (``g`` = 0, 1, … without gaps)."""

    def rounds(self) -> dict[int, int]:
        """How many times each compensation was re-driven (its current round)."""
        counts: dict[int, int] = {}
        for redrive in self.redrives.values():
            counts[redrive.index] = counts.get(redrive.index, 0) + 1
        return counts

    def ran(self) -> tuple[str, ...]:
        """The compensations that completed, in plan order (``name@position``)."""
        plan = self.compensating.plan
        return tuple(
            f"{plan[k].name}@{plan[k].position}"
            for k in range(len(plan))
            if k in self.records and self.records[k].ok
        )


@dataclass(frozen=True)
class Dispatch:
    """Run compensation ``index`` (its ``round``-th re-drive)."""

    index: int
    round: int


@dataclass(frozen=True)
class Stuck:
    """Compensation ``index`` failed for good: write ``{run}/cfailed/{g}`` and wait."""

    index: int
    g: int
    error: ErrorInfo | None


@dataclass(frozen=True)
class Done:
    """Every compensation completed: the run ends."""

    ran: tuple[str, ...]


def next_move(state: SagaState) -> Dispatch | Stuck | Done:
    """What the compensation phase does next (compensations run one at a time)."""
    rounds = state.rounds()
    for index in range(len(state.compensating.plan)):
        record = state.records.get(index)
        if record is None:
            return Dispatch(index, rounds.get(index, 0))
        if not record.ok:
            return Stuck(index, len(state.redrives), record.error)
    return Done(state.ran())


def pending_status(state: SagaState | None) -> RunStatus:
    """The status of a saga without a ``{run}/result`` record."""
    if state is None:
        return "running"
    if len(state.redrives) in state.failed:
        return "compensation_failed"
    return "compensating"
