"""Cron schedules, the pure part: validation, tick maths with querator's DST
rule, and the catch-up and overlap decisions. No I/O and no clock: every
function takes the instants it needs, so it is tested without waiting.

Ticks are computed on the schedule's **local wall clock** (naive datetimes in
its ``tz``), where every wall time occurs once, and then mapped to a UTC
instant by :func:`local_to_utc`:

- a wall time that does not exist (spring forward) maps to the first valid
  instant after the gap (the transition itself), so ``30 2 * * *`` runs once
  at 03:00 on the day Europe/Berlin skips 02:00-03:00, and several wall times
  inside one gap collapse into that single instant;
- a wall time that occurs twice (fall back) maps to its first occurrence, so it
  runs once.

The mapping never decreases, which is what lets :func:`next_tick` and
:func:`prev_tick` walk croniter's naive iteration and filter.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Literal, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter
from pydantic import Field

from querator.clock import stamp
from querator.errors import InvalidArgument
from querator.model_bases import StoredModel
from querator.queue.record_store import Versioned

__all__ = [
    "CatchupPolicy",
    "OverlapPlan",
    "OverlapPolicy",
    "ScheduleSpec",
    "ScheduleState",
    "check_cron",
    "check_tz",
    "due_ticks",
    "jitter_delay",
    "local_to_utc",
    "next_tick",
    "plan_overlap",
    "prev_tick",
    "tick_key",
]

CatchupPolicy = Literal["skip", "latest", "all"]
OverlapPolicy = Literal[
    "skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other", "allow_all"
]
LATE_TOLERANCE = 60.0
"""Seconds a tick may be late and still count as on time (fired under every catch-up policy)."""
MAX_TICKS_PER_PASS = 1000
"""Most ticks one scheduler pass handles for one schedule (the rest wait for the next pass)."""
MAX_BUFFERED = 1000
"""Most ticks ``buffer_all`` holds; older ones are dropped beyond it."""
_FOLD_SCAN = 100_000
"""Safety bound on ticks skipped while walking across a DST fold."""
_NEVER_PROBE = datetime(2000, 1, 1)
"""Where :func:`check_cron` looks for a first tick: a cron expression (no year
field) that has none in the following years never fires (``0 0 30 2 *``)."""


def check_cron(cron: str) -> str:
    """``cron`` if croniter accepts it with 5 fields (minute first) or 6 fields
    (**seconds first**: ``"*/10 * * * * *"`` fires every 10 seconds); else
    :class:`InvalidArgument` naming ``cron``."""
    if not isinstance(cron, str) or len(cron.split()) not in (5, 6):
        raise InvalidArgument(
            "cron",
            f"{cron!r}: expected 5 fields (minute hour day month weekday) or 6 (seconds first)",
        )
    if not croniter.is_valid(cron, second_at_beginning=True):
        raise InvalidArgument("cron", f"{cron!r} is not a valid cron expression")
    try:
        croniter(cron, _NEVER_PROBE, second_at_beginning=True).get_next(datetime)
    except CroniterError as exc:
        raise InvalidArgument("cron", f"{cron!r} never fires (no such date)") from exc
    return cron


def check_tz(tz: str) -> ZoneInfo:
    """The zone named ``tz`` (IANA, e.g. ``"Europe/Berlin"``), else InvalidArgument naming it."""
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, TypeError) as exc:
        raise InvalidArgument("tz", f"unknown time zone {tz!r}") from exc


class ScheduleSpec(StoredModel):
    """What a schedule fires: stored, so any scheduler can fire it by name."""

    name: str
    """The schedule's name (unique in the store)."""
    workflow: str
    """The persisted name of the workflow to start (of the task to defer when
    ``target`` is ``"task"``)."""
    target: Literal["workflow", "task"] = "workflow"
    """What each tick does: start a run of a workflow, or defer a task."""
    queue: str
    """The workflow queue of its runs (the task's queue for a task)."""
    timeout: float | None = None
    """The workflow's ``timeout`` (seconds), copied at definition."""
    cron: str
    tz: str = "UTC"
    args: str = "{}"
    """The run's arguments, encoded by the workflow's codec (JSON object by parameter)."""
    pass_tick: bool = False
    """The workflow has a parameter ``tick``: the tick instant (UTC) is passed in it."""
    catchup: CatchupPolicy = "skip"
    catchup_window: float = 86_400.0
    """``all`` fires missed ticks at most this many seconds old."""
    overlap: OverlapPolicy = "skip"
    jitter: float = 0.0
    """Each run's start is delayed by a deterministic 0..jitter seconds (never its key)."""


class ScheduleState(StoredModel, Versioned):
    """A schedule's stored record: its spec and what the schedulers did so far
    (``gen`` and ``token``: see :class:`~querator.queue.record_store.Versioned`)."""

    spec: ScheduleSpec
    paused: bool = False
    start_at: datetime
    """Ticks after this instant fire (the definition time unless given)."""
    last_tick: datetime | None = None
    """The latest tick handled (started, buffered or skipped by policy)."""
    last_run_id: str | None = None
    """The run most recently started by this schedule."""
    buffered: tuple[datetime, ...] = ()
    """Ticks held by ``buffer_one``/``buffer_all``/``cancel_other``, oldest first."""
    note: str = ""
    """Free text (why paused)."""
    updated_at: datetime = Field(default_factory=stamp)


def local_to_utc(wall: datetime, zone: tzinfo) -> datetime:
    """The UTC instant of naive local ``wall`` under querator's DST rule.

    Ambiguous (fall back): the first occurrence. Nonexistent (spring forward):
    the first valid instant after the gap.
    """
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if first.astimezone(zone).replace(tzinfo=None) == wall:
        return first  # exists (fold=0 is the first occurrence when ambiguous)
    # In a gap: fold=0 uses the offset before it (a later instant), fold=1 the
    # offset after it (an earlier one); the transition lies between them.
    low = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    high = first
    if low > high:
        low, high = high, low
    before = low.astimezone(zone).utcoffset()
    while high - low > timedelta(seconds=1):
        mid = low + (high - low) / 2
        mid = mid.replace(microsecond=0)
        if mid.astimezone(zone).utcoffset() == before:
            low = mid
        else:
            high = mid
    return high


def _wall(instant: datetime, zone: tzinfo) -> datetime:
    return instant.astimezone(zone).replace(tzinfo=None)


def _fold_margin(instant: datetime, zone: ZoneInfo) -> timedelta:
    """How far the wall clock went back, if ``instant`` is a second occurrence."""
    local = instant.astimezone(zone)
    if not local.fold:
        return timedelta(0)
    first = local.replace(fold=0).utcoffset() or timedelta(0)
    second = local.utcoffset() or timedelta(0)
    return max(first - second, timedelta(0))


def _iterate(cron: str, start: datetime) -> croniter:
    """croniter from naive local ``start``; InvalidArgument naming ``cron`` for a
    stored expression croniter refuses (one written before it was checked)."""
    try:
        return croniter(cron, start, second_at_beginning=True)
    except (CroniterError, ValueError, TypeError) as exc:
        raise InvalidArgument("cron", f"{cron!r} is not a valid cron expression") from exc


def _step(cron: str, move: Callable[[type[datetime]], datetime]) -> datetime:
    """croniter's next or previous wall time; InvalidArgument naming ``cron`` when
    it finds none (a stored expression that never fires: ``0 0 30 2 *``)."""
    try:
        return move(datetime)
    except CroniterError as exc:
        raise InvalidArgument("cron", f"{cron!r} never fires (no such date)") from exc


def next_tick(cron: str, zone: ZoneInfo, after: datetime) -> datetime:
    """The earliest tick strictly after ``after`` (aware), as a UTC instant."""
    it = _iterate(cron, _wall(after, zone))
    for _ in range(_FOLD_SCAN):
        instant = local_to_utc(_step(cron, it.get_next), zone)
        if instant > after:
            return instant
    raise InvalidArgument("cron", f"{cron!r} has no tick after {after.isoformat()}")


def prev_tick(cron: str, zone: ZoneInfo, upto: datetime) -> datetime:
    """The latest tick at or before ``upto`` (aware), as a UTC instant."""
    start = _wall(upto, zone) + _fold_margin(upto, zone) + timedelta(microseconds=1)
    it = _iterate(cron, start)
    for _ in range(_FOLD_SCAN):
        instant = local_to_utc(_step(cron, it.get_prev), zone)
        if instant <= upto:
            return instant
    raise InvalidArgument("cron", f"{cron!r} has no tick before {upto.isoformat()}")


def ticks_between(
    cron: str, zone: ZoneInfo, after: datetime, upto: datetime, limit: int
) -> list[datetime]:
    """Ticks in ``(after, upto]``, oldest first, at most ``limit``."""
    found: list[datetime] = []
    at = after
    while len(found) < limit:
        at = next_tick(cron, zone, at)
        if at > upto:
            break
        found.append(at)
    return found


def due_ticks(state: ScheduleState, now: datetime) -> tuple[list[datetime], datetime | None]:
    """The ticks to handle at ``now`` under the catch-up policy, oldest first,
    and the new ``last_tick`` (every tick up to it counts as handled).

    A tick at most :data:`LATE_TOLERANCE` seconds old is on time and always
    fires. Older ones were missed: ``skip`` drops them, ``latest`` fires only
    the most recent, ``all`` fires those within ``catchup_window`` (at most
    :data:`MAX_TICKS_PER_PASS` per pass; the next pass continues).
    """
    spec = state.spec
    zone = check_tz(spec.tz)
    floor = state.start_at - timedelta(microseconds=1)
    if state.last_tick is not None:
        floor = max(floor, state.last_tick)
    latest = prev_tick(spec.cron, zone, now)
    if latest <= floor:
        return [], state.last_tick
    if spec.catchup == "all":
        lower = max(floor, now - timedelta(seconds=spec.catchup_window))
        ticks = ticks_between(spec.cron, zone, lower, now, MAX_TICKS_PER_PASS)
        return ticks, (ticks[-1] if ticks else latest)
    lower = max(floor, now - timedelta(seconds=LATE_TOLERANCE, microseconds=1))
    ticks = ticks_between(spec.cron, zone, lower, now, MAX_TICKS_PER_PASS)
    if spec.catchup == "latest" and latest not in ticks:
        ticks.append(latest)
    return ticks, latest


@dataclass(frozen=True)
class OverlapPlan:
    """What to do with a pass's ticks, given whether the previous run is still going."""

    start: tuple[datetime, ...]
    """Ticks whose runs start now, oldest first."""
    buffered: tuple[datetime, ...]
    """Ticks held until the previous run ends."""
    cancel_previous: bool = False
    """Ask the previous run to cancel (``cancel_other``, ``terminate_other``)."""
    skipped: tuple[datetime, ...] = ()
    """Ticks dropped by the policy."""


def plan_overlap(
    policy: OverlapPolicy,
    new: list[datetime],
    buffered: tuple[datetime, ...],
    running: bool,
) -> OverlapPlan:
    """Apply the overlap policy to new ticks (oldest first) and the held ones.

    When nothing runs, the oldest pending tick starts; the others behave as if
    it were running (``allow_all`` starts them all; ``cancel_other`` and
    ``terminate_other`` start only the newest, since each would end the one
    before).
    """
    pending = (*buffered, *new)
    if not pending:
        return OverlapPlan((), ())
    if policy == "allow_all":
        return OverlapPlan(pending, ())
    if policy in ("cancel_other", "terminate_other"):
        return _plan_replace(policy, new, buffered, running)
    if not running:
        first, rest = pending[:1], pending[1:]
        kept = _buffer(policy, (), rest)
        return OverlapPlan(first, kept, skipped=tuple(t for t in rest if t not in kept))
    kept = _buffer(policy, buffered, tuple(new))
    return OverlapPlan((), kept, skipped=tuple(t for t in new if t not in kept))


def _buffer(
    policy: OverlapPolicy, held: tuple[datetime, ...], new: tuple[datetime, ...]
) -> tuple[datetime, ...]:
    if policy == "buffer_all":
        return (*held, *new)[-MAX_BUFFERED:]
    if policy == "buffer_one":
        return (*held, *new)[:1]
    return held  # skip


def _plan_replace(
    policy: OverlapPolicy, new: list[datetime], buffered: tuple[datetime, ...], running: bool
) -> OverlapPlan:
    pending = (*buffered, *new)
    newest, older = pending[-1], pending[:-1]
    if not running:
        return OverlapPlan((newest,), (), skipped=older)
    if not new:
        return OverlapPlan((), buffered)  # cancellation already asked for: wait
    if policy == "terminate_other":
        return OverlapPlan((newest,), (), cancel_previous=True, skipped=older)
    return OverlapPlan((), (newest,), cancel_previous=True, skipped=older)


def tick_key(name: str, tick: datetime) -> str:
    """The idempotency key of the run of schedule ``name`` at ``tick``."""
    return f"schedule:{name}:{tick.astimezone(UTC).isoformat()}"


def jitter_delay(name: str, tick: datetime, jitter: float) -> float:
    """A delay in ``[0, jitter)`` derived from the tick (every scheduler picks the same)."""
    if jitter <= 0:
        return 0.0
    digest = hashlib.sha256(tick_key(name, tick).encode()).digest()
    return jitter * int.from_bytes(digest[:8], "big") / 2**64


def check_policy(field: str, value: str, allowed: object) -> str:
    """``value`` if it is one of the Literal ``allowed``'s values; else InvalidArgument."""
    choices = get_args(allowed)
    if value not in choices:
        raise InvalidArgument(field, f"{value!r} is not one of {', '.join(choices)}")
    return value
