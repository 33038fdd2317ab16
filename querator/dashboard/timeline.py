"""A run's timeline, as the run page draws it: one lane per step call (ended,
running or waiting) and per child run, placed on the run's own span.

What the store keeps decides what is drawn: a step call's end and the
error of its last failed one (``{run}/{position}``); each attempt's start,
end and worker (:mod:`querator.workflows.attempts`), drawn as segments of the
lane, retries included; for a call not ended, its item's lease (the worker
that holds it, until when) or when it is due; a child run's start and end.
A lane begins at its first recorded attempt, else where the previous call
ended (the run's start for the first). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from querator.workflows.attempts import AttemptInfo
from querator.workflows.inspection import RunInfo

SCALE = 1000
"""Lanes are placed on ``0..SCALE`` (the SVG's viewBox width)."""
MIN_WIDTH = 4
"""The narrowest bar drawn (an instant step stays visible)."""


@dataclass(frozen=True)
class Segment:
    """One attempt, drawn inside its lane."""

    attempt: AttemptInfo
    state: str
    """``completed``, ``failed`` or ``running``."""
    x: int
    width: int
    end: datetime


@dataclass(frozen=True)
class Lane:
    """One bar of the timeline."""

    position: int | None
    """The call's position in the body (None for a child found off the steps)."""
    label: str
    state: str
    """``completed``, ``failed``, ``running``, ``waiting`` or a child run's status."""
    start: datetime
    end: datetime
    x: int
    """Where the bar starts on ``0..SCALE``."""
    width: int
    attempts: int
    detail: str
    """The worker holding it, its error, when it is due (as words)."""
    child: str | None = None
    """The child run's id, for a link."""
    tries: tuple[AttemptInfo, ...] = ()
    """The call's recorded attempts (retries first)."""
    segments: tuple[Segment, ...] = ()
    """Those with a start, placed on the run's span."""


def _place(start: datetime, end: datetime, origin: datetime, span: float) -> tuple[int, int]:
    x = (start - origin).total_seconds() / span * SCALE
    w = (end - start).total_seconds() / span * SCALE
    x = min(max(0, round(x)), SCALE - MIN_WIDTH)
    return x, min(max(MIN_WIDTH, round(w)), SCALE - x)


def _segments(
    tries: list[AttemptInfo], origin: datetime, span: float, now: datetime
) -> tuple[Segment, ...]:
    found = []
    for one in tries:
        if one.started_at is None:
            continue
        end = one.ended_at or now
        x, w = _place(one.started_at, end, origin, span)
        state = "running" if one.running else "completed" if one.ok else "failed"
        found.append(Segment(attempt=one, state=state, x=x, width=w, end=end))
    return tuple(found)


def _first_start(tries: list[AttemptInfo], fallback: datetime) -> datetime:
    starts = [a.started_at for a in tries if a.started_at is not None]
    return min(starts) if starts else fallback


def lanes(
    run: RunInfo,
    children: dict[int, RunInfo],
    now: datetime,
    attempts: dict[int, list[AttemptInfo]] | None = None,
) -> list[Lane]:
    """The lanes of ``run`` (from :func:`~querator.workflows.get_run`) with its
    ``children`` by position and its step calls' ``attempts`` (from
    :func:`~querator.workflows.attempts.run_attempts`), at ``now``, in position order."""
    attempts = attempts or {}
    origin = run.started_at
    end = run.finished_at or max([now, *(p.due_at for p in run.pending)])
    span = max((end - origin).total_seconds(), 0.001)
    found: list[Lane] = []
    previous = origin
    for step in sorted(run.steps, key=lambda s: s.finished_at):
        child = children.get(step.position)
        tries = attempts.get(step.position, [])
        start = child.started_at if child is not None else _first_start(tries, previous)
        x, w = _place(start, step.finished_at, origin, span)
        detail = "" if step.ok else f"{step.error_type}: {step.error_message}"
        found.append(
            Lane(
                position=step.position,
                label=step.step,
                state="completed" if step.ok else "failed",
                start=start,
                end=step.finished_at,
                x=x,
                width=w,
                attempts=step.attempts,
                detail=detail,
                child=child.run_id if child is not None else None,
                tries=tuple(tries),
                segments=_segments(tries, origin, span, now),
            )
        )
        previous = max(previous, step.finished_at)
    ended = {lane.position for lane in found}
    for pending in run.pending:
        running = pending.leased_until is not None and pending.worker is not None
        until = now if running else max(now, pending.due_at)
        tries = [] if pending.compensation else attempts.get(pending.position, [])
        start = _first_start(tries, previous)
        x, w = _place(start, until, origin, span)
        if running:
            detail = f"on {pending.worker}, leased until {pending.leased_until:%H:%M:%S}Z"
        else:
            detail = f"due {pending.due_at:%Y-%m-%d %H:%M:%S}Z"
        found.append(
            Lane(
                position=pending.position,
                label=pending.step + (" (compensation)" if pending.compensation else ""),
                state="running" if running else "waiting",
                start=start,
                end=until,
                x=x,
                width=w,
                attempts=pending.attempts,
                detail=detail,
                tries=tuple(tries),
                segments=_segments(tries, origin, span, now),
            )
        )
        ended.add(pending.position)
    for position, child in sorted(children.items()):
        if position in ended:
            continue
        child_end = child.finished_at or now
        x, w = _place(child.started_at, child_end, origin, span)
        found.append(
            Lane(
                position=position,
                label=child.workflow,
                state=child.status,
                start=child.started_at,
                end=child_end,
                x=x,
                width=w,
                attempts=0,
                detail="child run",
                child=child.run_id,
            )
        )
    return sorted(found, key=lambda lane: (lane.position is None, lane.position or 0))
