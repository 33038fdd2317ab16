"""A run's step attempts: when each began and ended, the worker that ran it and
what it raised, for a timeline (the dashboard's run page).

A step call's last attempt is its own record (``{run}/{position}``: its
``started_at`` and ``worker``); each attempt that failed and was retried left
``{run}/{position}/attempt/{n}``, committed with its retry. An attempt whose
lease ran out (its worker died or stopped) left nothing: it shows as a gap.

    from querator.workflows import get_run
    from querator.workflows.attempts import run_attempts

    run = get_run(q, run_id)
    for position, attempts in run_attempts(q, run).items():
        for a in attempts:
            print(position, a.attempt, a.worker, a.started_at, a.ended_at, a.error)
"""

from __future__ import annotations

from datetime import datetime

from querator.model_bases import View
from querator.queue.client import QueueClient
from querator.queue.service import AsyncQueueClient
from querator.workflows.keys import RESULTS_QUEUE, attempt_key, step_key
from querator.workflows.run_models import RunInfo
from querator.workflows.stored import AttemptRecord

__all__ = ["AttemptInfo", "run_attempts", "run_attempts_async"]

SHOWN = 50
"""Failed attempts read per step call at most (its latest)."""
LOOKUP = 1000
"""Keys one lookup reads."""


class AttemptInfo(View):
    """One attempt of a step call."""

    attempt: int
    """1-based, deferrals included."""
    ok: bool
    """True for the attempt that returned."""
    running: bool = False
    """True for the attempt under way (``ended_at`` is None)."""
    worker: str | None = None
    """The client id of the worker that ran it (None: not recorded)."""
    started_at: datetime | None = None
    ended_at: datetime | None = None
    error: str | None = None
    """``type: message`` of what it raised."""


async def run_attempts_async(aq: AsyncQueueClient, run: RunInfo) -> dict[int, list[AttemptInfo]]:
    """The recorded attempts of ``run``'s step calls (from
    :func:`~querator.workflows.get_run`), by position, in attempt order: the
    retried ones (the latest :data:`SHOWN` of each call), then the last one
    (ended, or running with its worker). Calls without attempts (timers,
    messages, child runs) are left out."""
    wanted = _retried_keys(run)
    keys = list(wanted)
    found: dict[int, list[AttemptInfo]] = {}
    for at in range(0, len(keys), LOOKUP):
        hits = await aq.lookup(RESULTS_QUEUE, keys[at : at + LOOKUP])
        for key, item in hits.items():
            record = AttemptRecord.model_validate_json(item.payload)
            found.setdefault(wanted[key], []).append(_failed(record))
    for position, last in _last_attempts(run):
        found.setdefault(position, []).append(last)
    return {p: sorted(a, key=lambda i: i.attempt) for p, a in sorted(found.items())}


def _retried_keys(run: RunInfo) -> dict[str, int]:
    """The keys of the records the run's retried attempts may have left, with their
    calls' positions."""
    calls = [(s.position, s.attempts) for s in run.steps if s.started_at is not None]
    for pending in run.pending:  # a running attempt is not a retried one
        if not pending.compensation:
            top = pending.attempts if pending.leased_until is not None else pending.attempts + 1
            calls.append((pending.position, top))
    return {
        attempt_key(step_key(run.run_id, position), n): position
        for position, top in calls
        for n in range(max(1, top - SHOWN), top)
    }


def _last_attempts(run: RunInfo) -> list[tuple[int, AttemptInfo]]:
    """The attempt each ended call ended with, and each running one."""
    found = []
    for step in run.steps:
        if step.started_at is not None:
            error = None if step.ok else f"{step.error_type}: {step.error_message}"
            last = AttemptInfo(
                attempt=step.attempts,
                ok=step.ok,
                worker=step.worker,
                started_at=step.started_at,
                ended_at=step.finished_at,
                error=error,
            )
            found.append((step.position, last))
    for pending in run.pending:
        if not pending.compensation and pending.leased_until is not None and pending.worker:
            running = AttemptInfo(
                attempt=pending.attempts, ok=False, running=True, worker=pending.worker
            )
            found.append((pending.position, running))
    return found


def _failed(record: AttemptRecord) -> AttemptInfo:
    return AttemptInfo(
        attempt=record.attempt,
        ok=False,
        worker=record.worker,
        started_at=record.started_at,
        ended_at=record.ended_at,
        error=f"{record.error.type}: {record.error.message}",
    )


def run_attempts(q: QueueClient, run: RunInfo) -> dict[int, list[AttemptInfo]]:
    """See :func:`run_attempts_async`."""
    return q.call(run_attempts_async, q.aio, run)
