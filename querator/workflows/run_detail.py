"""What a run is doing now, for :func:`~querator.workflows.inspection.get_run`:
its step items not yet ended, what it waits for that no live worker serves,
its unread messages and its saga's compensations.

A run's items (step items ``{run}/{position}/step…``, wake tasks
``{run}/wake/…``) are found by their dedup keys with one index range scan per
worker queue (``scan_keys``); compensations come from the saga's stored
compensation records. Unread messages are the run's mailbox
(``{run}/msg/…``, one range scan of at most :data:`UNREAD_SCAN` messages) less
those its ``recv`` records name.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence, Set
from datetime import datetime
from typing import Literal

from pydantic import ValidationError

from querator.errors import QueueNotFound
from querator.limits.gate import PARK_PREFIX, PARKED_KIND
from querator.model_bases import View
from querator.queue.models import StoredItem
from querator.queue.service import AsyncQueueClient
from querator.workflows.engine.mailbox import mailbox_prefix
from querator.workflows.keys import RESULTS_QUEUE, is_step, is_wake
from querator.workflows.pollers import read_pollers, unserved_reason
from querator.workflows.sagas.compensation import load_saga_state
from querator.workflows.stored import StepPayload, WaitRecord

__all__ = [
    "UNREAD_SCAN",
    "CompensationInfo",
    "PendingStep",
    "UnreadMessages",
    "WaitInfo",
    "compensations",
    "current_waits",
    "pending_steps",
    "run_items",
    "unread_messages",
    "waiting_for",
]

QUEUES_PAGE = 100
ITEMS_PAGE = 100
UNREAD_SCAN = 5_000
"""Messages (read or not) :func:`unread_messages` reads at most for one run."""
_UNREAD_PAGE = 1_000


class PendingStep(View):
    """A step call whose item waits or runs: not ended yet."""

    position: int
    step: str
    """The step's persisted name."""
    queue: str
    attempts: int
    """Leases of its item so far (a running step counts its current one)."""
    leased_until: datetime | None
    """While a worker runs it: when its lease ends unless renewed."""
    due_at: datetime
    """When it may run (later than now: waiting for a retry or a deferral)."""
    compensation: bool = False
    """True for a saga's compensation."""
    worker: str | None = None
    """While a worker runs it: that worker's client id."""


class WaitInfo(View):
    """One thing a running run waits for."""

    kind: Literal["timer", "message", "event", "child", "step", "limit"]
    """``timer`` (``sleep``), ``message`` (``recv``), ``event``
    (``wait_for_event``), ``child`` (a child workflow's run), ``step`` (a step
    call queued, running, or due later: a retry, a deferral, a rate limit) or
    ``limit`` (a step call parked for its concurrency limit)."""
    position: int
    """The call's position in the body."""
    name: str | None = None
    """The topic, the event's name, the child run's id, the step's name, or the
    limit's semaphore (``limit``); None for a timer."""
    since: datetime | None = None
    """When the wait began, where known."""
    until: datetime | None = None
    """When it ends: a timer's end, a wait's timeout, a child's deadline, a
    step's due time when later than now (None: no end)."""


class UnreadMessages(View):
    """The messages sent to a run on one topic that no ``recv`` has read yet."""

    topic: str
    count: int
    """How many (of those read: see :attr:`~querator.workflows.RunInfo.unread_more`)."""
    oldest_sent_at: datetime
    """When the oldest of them was sent (the next ``recv(topic)`` reads it)."""


class CompensationInfo(View):
    """One compensation of a saga's plan (in the order they run)."""

    position: int
    """The position of the step it undoes."""
    step: str
    """The step it undoes."""
    name: str
    """The compensation's persisted name."""
    outcome: str
    """``completed``, ``failed`` (for good: the saga is ``compensation_failed``)
    or ``pending``."""
    attempts: int = 0
    finished_at: datetime | None = None
    error: str | None = None
    """``type: message`` when it failed."""


async def _queues(aq: AsyncQueueClient, first: str) -> list[str]:
    """The run's workflow queue first, then every other queue but the results."""
    names, pivot = [first], None
    while True:
        page = [i.name for i in await aq.list_queues(pivot=pivot, limit=QUEUES_PAGE)]
        page = [name for name in page if name != pivot]
        if not page:
            return names
        names += [n for n in page if n not in (first, RESULTS_QUEUE)]
        pivot = page[-1]


async def run_items(
    aq: AsyncQueueClient, run_id: str, workflow_queue: str
) -> list[tuple[str, StoredItem]]:
    """The run's wake tasks and step items in every queue, with their queues."""
    found: list[tuple[str, StoredItem]] = []
    for queue in await _queues(aq, workflow_queue):
        after = None
        while True:
            try:
                page = await aq.scan_keys(queue, f"{run_id}/", after=after, limit=ITEMS_PAGE)
            except QueueNotFound:
                break  # deleted meanwhile
            found += [(queue, item) for item in page if _runs_it(item.kind)]
            if len(page) < ITEMS_PAGE:
                break
            after = page[-1].dedup_key
    return found


def _runs_it(kind: str) -> bool:
    """A run's wake task, step item, or a step call parked for its limit."""
    return is_step(kind) or is_wake(kind) or kind == PARKED_KIND


def parked_limits(items: Sequence[tuple[str, StoredItem]]) -> dict[int, str]:
    """The semaphore each step call parked for its concurrency limit waits on,
    by position (from the parked records among ``items``)."""
    found = {}
    for queue, item in items:
        parts = (item.dedup_key or "").split("/")
        if item.kind == PARKED_KIND and len(parts) == 3 and parts[1].isdigit():
            found[int(parts[1])] = queue.removeprefix(PARK_PREFIX)
    return found


def current_waits(
    waits: dict[int, WaitRecord],
    sleeps: Sequence[tuple[int, datetime, datetime]],
    pending: Sequence[PendingStep],
    parked: dict[int, str],
    now: datetime,
) -> list[WaitInfo]:
    """What a running run waits for, by position: its wait records
    (``{run}/{position}/wait``, calls without an outcome), a timer not ended
    (``sleeps``: position, since, until), its pending step calls (``limit``
    when ``parked`` for a concurrency limit)."""
    found = [
        WaitInfo(kind=w.kind, position=p, name=w.name, since=w.since, until=w.until)
        for p, w in waits.items()
    ]
    found += [
        WaitInfo(kind="timer", position=p, since=since, until=until)
        for p, since, until in sleeps
        if until > now
    ]
    for step in pending:
        if step.compensation:
            continue
        semaphore = parked.get(step.position)
        kind: Literal["step", "limit"] = "limit" if semaphore is not None else "step"
        until = step.due_at if step.due_at > now and semaphore is None else None
        found.append(
            WaitInfo(kind=kind, position=step.position, name=semaphore or step.step, until=until)
        )
    return sorted(found, key=lambda w: w.position)


def pending_steps(items: Sequence[tuple[str, StoredItem]]) -> list[PendingStep]:
    """The step calls among a run's ``items`` (:func:`run_items`), by position
    (compensations last)."""
    found: list[PendingStep] = []
    for queue, item in items:
        if not is_step(item.kind):
            continue
        with contextlib.suppress(ValidationError):
            payload = StepPayload.model_validate_json(item.payload)
            found.append(
                PendingStep(
                    position=payload.position,
                    step=payload.step,
                    queue=queue,
                    attempts=payload.prior_attempts + item.attempts,
                    leased_until=item.lease_deadline,
                    due_at=item.available_at,
                    compensation=payload.slot is not None,
                    worker=item.client_id if item.lease_deadline is not None else None,
                )
            )
    return sorted(found, key=lambda p: (p.compensation, p.position))


async def waiting_for(aq: AsyncQueueClient, items: Sequence[tuple[str, StoredItem]]) -> list[str]:
    """What a run's due, unleased ``items`` wait for when no live worker serves
    them (:func:`~querator.workflows.pollers.unserved_reason`), once each."""
    now = aq.clock.now()
    ready = [
        (queue, item.kind)
        for queue, item in items
        if item.kind != PARKED_KIND
        and item.available_at <= now
        and (item.lease_deadline is None or item.lease_deadline <= now)
    ]
    if not ready:
        return []
    pollers = await read_pollers(aq)
    reasons = (unserved_reason(pollers, queue, kind, now) for queue, kind in dict.fromkeys(ready))
    return [reason for reason in reasons if reason is not None]


async def unread_messages(
    aq: AsyncQueueClient, run_id: str, read: Set[str]
) -> tuple[list[UnreadMessages], bool]:
    """The run's unread messages by topic (in topic order), and whether it has
    more messages than the :data:`UNREAD_SCAN` read (then the counts are of
    those read). ``read``: the keys of the messages its ``recv`` records name."""
    prefix = mailbox_prefix(run_id)
    counts: dict[str, tuple[int, datetime]] = {}
    after: str | None = None
    seen = 0
    while True:
        try:
            page = await aq.scan_keys(RESULTS_QUEUE, prefix, after=after, limit=_UNREAD_PAGE)
        except QueueNotFound:
            return [], False
        seen += len(page)
        for item in page:
            key = item.dedup_key or ""
            if key in read:
                continue
            topic = key[len(prefix) :].partition("/")[0]
            count, oldest = counts.get(topic, (0, item.created_at))
            counts[topic] = (count + 1, min(oldest, item.created_at))
        if len(page) < _UNREAD_PAGE:
            return _unread(counts), False
        if seen >= UNREAD_SCAN:
            return _unread(counts), True
        after = page[-1].dedup_key


def _unread(counts: dict[str, tuple[int, datetime]]) -> list[UnreadMessages]:
    return [
        UnreadMessages(topic=topic, count=count, oldest_sent_at=oldest)
        for topic, (count, oldest) in counts.items()
    ]


async def compensations(aq: AsyncQueueClient, run_id: str) -> list[CompensationInfo]:
    """The saga's compensation plan with each one's outcome (empty: none planned)."""
    state = await load_saga_state(aq, run_id)
    if state is None:
        return []
    infos = []
    for index, entry in enumerate(state.compensating.plan):
        record = state.records.get(index)
        if record is None:
            outcome, error = "pending", None
        elif record.ok:
            outcome, error = "completed", None
        else:
            outcome = "failed"
            error = f"{record.error.type}: {record.error.message}" if record.error else None
        infos.append(
            CompensationInfo(
                position=entry.position,
                step=entry.step,
                name=entry.name,
                outcome=outcome,
                attempts=record.attempts if record else 0,
                finished_at=record.finished_at if record else None,
                error=error,
            )
        )
    return infos
