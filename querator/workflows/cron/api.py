"""Defining and managing cron schedules: ``schedule``, pause, resume, delete,
list, trigger. Sync functions take a :class:`QueueClient`, their ``*_async``
twins an :class:`AsyncQueueClient`; both run the same coroutine.

See docs/schedules.md. The firing itself is done by
:class:`querator.workflows.cron.scheduler.Scheduler`.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypedDict

from typing_extensions import Unpack

from querator.errors import InvalidArgument, QueueNotFound
from querator.model_bases import View
from querator.queue.client import QueueClient
from querator.queue.options import check_options
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import MAX_DURATION, check_duration, check_name
from querator.tasks.layout import task_kind
from querator.tasks.spec import TaskSpec
from querator.telemetry.runs import Started, starting
from querator.workflows.cron.schedules import (
    CatchupPolicy,
    OverlapPolicy,
    ScheduleSpec,
    ScheduleState,
    check_cron,
    check_policy,
    check_tz,
    next_tick,
    tick_key,
)
from querator.workflows.cron.store import Stored, read_all, read_one, remove, write
from querator.workflows.cron.task_ticks import tick_args
from querator.workflows.engine.commit import ensure_work_queue
from querator.workflows.functions import WorkflowFunction
from querator.workflows.inspection import RunInfo, run_infos_async
from querator.workflows.keys import (
    RESULTS_QUEUE,
    RESULTS_SETTINGS,
    WORKFLOW_QUEUE,
    meta_key,
    new_run_id,
    wake_kind,
)
from querator.workflows.pollers import Poller, read_pollers, served_by
from querator.workflows.runs import AsyncRunHandle, RunHandle, RunStatus
from querator.workflows.stored import RunMeta, start_items

__all__ = [
    "ScheduleInfo",
    "delete_schedule",
    "delete_schedule_async",
    "get_schedule",
    "get_schedule_async",
    "list_schedules",
    "list_schedules_async",
    "pause_schedule",
    "pause_schedule_async",
    "resume_schedule",
    "resume_schedule_async",
    "schedule",
    "schedule_async",
    "trigger_schedule",
    "trigger_schedule_async",
]

CAS_ATTEMPTS = 20


class ScheduleInfo(View):
    """A schedule as :func:`list_schedules` shows it."""

    name: str
    workflow: str
    """The workflow it starts (the task it defers, when ``target`` is ``"task"``)."""
    target: Literal["workflow", "task"] = "workflow"
    cron: str
    tz: str
    catchup: CatchupPolicy
    overlap: OverlapPolicy
    jitter: float
    paused: bool
    note: str = ""
    next_fire: datetime | None
    """The next tick (UTC) after now; None while paused."""
    last_tick: datetime | None
    """The latest tick handled (started, buffered or skipped)."""
    last_run_id: str | None
    """The run most recently started (a task schedule: the task id last deferred)."""
    last_run_status: RunStatus | None
    """Status of the run most recently started (None: none yet, or a task schedule)."""
    last_run_error: str | None = None
    """Why that run failed: the error's type and message (None: it did not fail)."""
    orphan: bool = False
    """True when no live worker serves the workflow (see
    :mod:`querator.workflows.pollers`): the runs the schedule fires wait in
    their queue until a worker that serves it polls."""
    buffered: int
    """Ticks waiting for the previous run to end."""
    broken: str | None = None
    """Why the stored schedule cannot fire (a cron expression that never fires
    or a time zone this machine does not know: written before they were
    checked, or by hand); None when it can. Schedulers skip it; redefine it
    with :func:`schedule` or delete it."""


class ScheduleOptions(TypedDict, total=False):
    """The options of a schedule, shared by every form of ``schedule`` (the
    defaults are read in :func:`make_spec` and :func:`schedule_async`)."""

    tz: str
    """Time zone of ``cron`` (default ``"UTC"``)."""
    args: tuple[Any, ...]
    """Positional arguments of each run."""
    kwargs: dict[str, Any] | None
    """Keyword arguments of each run."""
    catchup: str
    """``"skip"`` (default), ``"latest"`` or ``"all"``: ticks missed while no scheduler ran."""
    catchup_window: float
    """``all`` looks back at most this many seconds (default one day)."""
    overlap: str
    """``"skip"`` (default), ``"buffer_one"``, ``"buffer_all"``, ``"cancel_other"``,
    ``"terminate_other"`` or ``"allow_all"``: a tick while the last run still runs."""
    jitter: float
    """Each run starts up to this many seconds late (default 0)."""
    queue: str | None
    """The runs' workflow queue (default: the workflow's)."""
    start_at: datetime | None
    """Ticks after this instant fire (default now; a redefinition without it keeps
    the schedule's progress)."""


TASK_OVERLAPS = ("skip", "allow_all", "buffer_one", "buffer_all")
"""The overlap policies of task schedules (a tick's task overlaps while its
item waits or runs; a task is never cancelled by a tick)."""


def make_spec(
    name: str,
    fn: WorkflowFunction[..., Any] | TaskSpec[..., Any],
    *,
    cron: str,
    **options: Unpack[ScheduleOptions],
) -> ScheduleSpec:
    """Validate a definition (InvalidArgument naming the field) and encode it."""
    check_options("schedule", options, ScheduleOptions)
    check_name("name", name)
    if not isinstance(fn, WorkflowFunction | TaskSpec):
        raise InvalidArgument("fn", f"{fn!r} is not a @workflow or @task function")
    is_task = isinstance(fn, TaskSpec)
    if is_task and options.get("overlap", "skip") not in TASK_OVERLAPS:
        raise InvalidArgument("overlap", f"a task schedule takes {', '.join(TASK_OVERLAPS)}")
    check_cron(cron)
    tz = options.get("tz", "UTC")
    check_tz(tz)
    jitter = options.get("jitter", 0.0)
    if jitter:
        check_duration("jitter", jitter)
    catchup_window = check_duration("catchup_window", options.get("catchup_window", 86_400.0))
    args, queue = options.get("args", ()), options.get("queue")
    catchup, overlap = options.get("catchup", "skip"), options.get("overlap", "skip")
    pass_tick = "tick" in inspect.signature(fn.fn).parameters
    kwargs = dict(options.get("kwargs") or {})
    if pass_tick and "tick" in kwargs:
        raise InvalidArgument("kwargs", "'tick' is passed by the scheduler")
    if pass_tick:
        encoded = _encode_without_tick(fn, args, kwargs)
    else:
        encoded = fn.codec.encode_args(args, kwargs)
    return ScheduleSpec(
        name=name,
        workflow=fn.name,
        target="task" if is_task else "workflow",
        queue=check_name("queue", queue or fn.queue or WORKFLOW_QUEUE),
        timeout=None if is_task else fn.timeout,
        cron=cron,
        tz=tz,
        args=encoded,
        pass_tick=pass_tick,
        catchup=check_policy("catchup", catchup, CatchupPolicy),  # type: ignore[arg-type]
        catchup_window=catchup_window,
        overlap=check_policy("overlap", overlap, OverlapPolicy),  # type: ignore[arg-type]
        jitter=float(jitter),
    )


def _encode_without_tick(
    fn: WorkflowFunction[..., Any] | TaskSpec[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> str:
    """Encode with a placeholder tick (checked for fit), then drop it.

    The placeholder is what the scheduler stores, ISO text: a ``tick``
    annotated ``datetime`` decodes it as an aware instant, ``str`` (or none)
    keeps the text, and a type that cannot take it is refused here."""
    sample = datetime(2000, 1, 1, tzinfo=UTC).isoformat()
    encoded = json.loads(fn.codec.encode_args(args, {**kwargs, "tick": sample}))
    encoded.pop("tick", None)
    return json.dumps(encoded, separators=(",", ":"))


async def _update(
    aq: AsyncQueueClient, name: str, change: Callable[[ScheduleState], ScheduleState]
) -> ScheduleState:
    for _ in range(CAS_ATTEMPTS):
        current = await read_one(aq, name)
        if current is None:
            raise InvalidArgument("name", f"no schedule {name!r}")
        new = change(current.record)
        if await write(aq, current, new):
            return new
    raise InvalidArgument("name", f"schedule {name!r} kept changing; try again")


async def upsert_async(aq: AsyncQueueClient, spec: ScheduleSpec, start_at: datetime | None) -> bool:
    """Create the schedule, or replace its spec keeping its progress; True if changed."""
    for _ in range(CAS_ATTEMPTS):
        current = await read_one(aq, spec.name)
        if current is not None and current.record.spec == spec and start_at is None:
            return False
        state = _new_state(current, spec, start_at, aq.clock.now())
        if await write(aq, current, state):
            return True
    raise InvalidArgument("name", f"schedule {spec.name!r} kept changing; try again")


def _new_state(
    current: Stored | None, spec: ScheduleSpec, start_at: datetime | None, now: datetime
) -> ScheduleState:
    if current is None:
        return ScheduleState(spec=spec, start_at=start_at or now, updated_at=now)
    update: dict[str, Any] = {"spec": spec}
    if start_at is not None:
        update.update(start_at=start_at, last_tick=None)
    return current.record.model_copy(update=update)


async def schedule_async(
    aq: AsyncQueueClient,
    name: str,
    fn: WorkflowFunction[..., Any] | TaskSpec[..., Any],
    *,
    cron: str,
    **options: Unpack[ScheduleOptions],
) -> None:
    """See :func:`schedule`."""
    spec = make_spec(name, fn, cron=cron, **options)
    start_at = options.get("start_at")
    if start_at is not None and start_at.tzinfo is None:
        raise InvalidArgument("start_at", "must be timezone-aware")
    await upsert_async(aq, spec, start_at)


def schedule(
    q: QueueClient,
    name: str,
    fn: WorkflowFunction[..., Any] | TaskSpec[..., Any],
    *,
    cron: str,
    **options: Unpack[ScheduleOptions],
) -> None:
    """Create (or redefine) schedule ``name``: start ``fn(*args, **kwargs)`` at
    every tick of ``cron`` in time zone ``tz`` (``fn`` a ``@workflow``: a run;
    a ``@task``: a deferral, once per tick whatever the schedulers).

    The options are those of :class:`ScheduleOptions`: ``tz``, ``args``,
    ``kwargs``, ``catchup`` (``"skip"``, ``"latest"`` or ``"all"``, which looks
    back at most ``catchup_window`` seconds), ``overlap`` (``"skip"``,
    ``"buffer_one"``, ``"buffer_all"``, ``"cancel_other"``,
    ``"terminate_other"`` or ``"allow_all"``), ``jitter`` (each run starts up to
    that many seconds late), ``queue`` and ``start_at`` (ticks after it fire;
    default now; a redefinition without it keeps the schedule's progress). A
    workflow (or task) with a parameter ``tick`` receives the tick instant (UTC)
    in it. A task schedule takes the ``overlap`` policies ``"skip"``,
    ``"allow_all"``, ``"buffer_one"`` and ``"buffer_all"`` (a tick overlaps
    while the last tick's task waits or runs).
    Invalid values and unknown options raise :class:`InvalidArgument` naming
    the field.
    """
    q.call(schedule_async, q.aio, name, fn, cron=cron, **options)


async def pause_schedule_async(aq: AsyncQueueClient, name: str, note: str = "") -> None:
    """See :func:`pause_schedule`."""
    await _update(aq, name, lambda s: s.model_copy(update={"paused": True, "note": note}))


def pause_schedule(q: QueueClient, name: str, note: str = "") -> None:
    """Stop firing ``name`` until resumed (ticks meanwhile follow the catch-up policy)."""
    q.call(pause_schedule_async, q.aio, name, note)


async def resume_schedule_async(aq: AsyncQueueClient, name: str) -> None:
    """See :func:`resume_schedule`."""
    await _update(aq, name, lambda s: s.model_copy(update={"paused": False, "note": ""}))


def resume_schedule(q: QueueClient, name: str) -> None:
    """Fire ``name`` again; ticks missed while paused follow its catch-up policy."""
    q.call(resume_schedule_async, q.aio, name)


async def delete_schedule_async(aq: AsyncQueueClient, name: str) -> bool:
    """See :func:`delete_schedule`."""
    current = await read_one(aq, name)
    if current is None:
        return False
    await remove(aq, current)
    return True


def delete_schedule(q: QueueClient, name: str) -> bool:
    """Delete ``name`` (its runs are untouched); False if there was none."""
    return bool(q.call(delete_schedule_async, q.aio, name))


async def _last_run(aq: AsyncQueueClient, run_id: str | None) -> RunInfo | None:
    if run_id is None:
        return None
    try:
        return (await run_infos_async(aq, [run_id])).get(run_id)
    except QueueNotFound:
        return None


async def _info(
    aq: AsyncQueueClient, state: ScheduleState, now: datetime, pollers: list[Poller]
) -> ScheduleInfo:
    spec = state.spec
    next_fire, broken = None, None
    try:
        zone = check_tz(spec.tz)
        after = max(now, state.start_at - timedelta(microseconds=1))
        upcoming = next_tick(spec.cron, zone, after)
    except InvalidArgument as exc:
        broken = str(exc)
    else:
        next_fire = None if state.paused else upcoming
    last = await _last_run(aq, state.last_run_id) if spec.target == "workflow" else None
    error = f"{last.error_type}: {last.error_message}" if last and last.error_type else None
    return ScheduleInfo(
        name=spec.name,
        workflow=spec.workflow,
        target=spec.target,
        cron=spec.cron,
        tz=spec.tz,
        catchup=spec.catchup,
        overlap=spec.overlap,
        jitter=spec.jitter,
        paused=state.paused,
        note=state.note,
        next_fire=next_fire,
        last_tick=state.last_tick,
        last_run_id=state.last_run_id,
        last_run_status=last.status if last else None,
        last_run_error=error,
        orphan=not any(p.live for p in served_by(pollers, spec.queue, _kind(spec))),
        buffered=len(state.buffered),
        broken=broken,
    )


def _kind(spec: ScheduleSpec) -> str:
    """The kind of the items a worker serving the schedule's target leases."""
    return task_kind(spec.workflow) if spec.target == "task" else wake_kind(spec.workflow)


async def list_schedules_async(aq: AsyncQueueClient) -> list[ScheduleInfo]:
    """See :func:`list_schedules`."""
    when = aq.clock.now()
    pollers = await read_pollers(aq)
    return [await _info(aq, stored.record, when, pollers) for stored in await read_all(aq)]


def list_schedules(q: QueueClient) -> list[ScheduleInfo]:
    """Every schedule by name, with its next fire time (from the client's clock)
    and its last run's status."""
    return list(q.call(list_schedules_async, q.aio))


async def get_schedule_async(aq: AsyncQueueClient, name: str) -> ScheduleInfo:
    """See :func:`get_schedule`."""
    current = await read_one(aq, name)
    if current is None:
        raise InvalidArgument("name", f"no schedule {name!r}")
    return await _info(aq, current.record, aq.clock.now(), await read_pollers(aq))


def get_schedule(q: QueueClient, name: str) -> ScheduleInfo:
    """One schedule (InvalidArgument if there is none)."""
    result: ScheduleInfo = q.call(get_schedule_async, q.aio, name)
    return result


async def start_tick(
    aq: AsyncQueueClient, spec: ScheduleSpec, tick: datetime, key: str, delay: float = 0.0
) -> str:
    """Start the run of ``spec`` for ``tick`` under idempotency ``key``; its run id.

    Starting twice with one key starts one run (the key derives the run id).
    """
    with starting(spec.workflow, spec.queue) as started:
        run_id = await _start_tick(aq, spec, tick, key, delay, started)
    return run_id


async def _start_tick(
    aq: AsyncQueueClient,
    spec: ScheduleSpec,
    tick: datetime,
    key: str,
    delay: float,
    started: Started,
) -> str:
    run_id = new_run_id(key)
    await aq.create_queue(RESULTS_QUEUE, RESULTS_SETTINGS, exist_ok=True)
    if meta_key(run_id) in await aq.lookup(RESULTS_QUEUE, [meta_key(run_id)]):
        started.created(run_id, spec.workflow, existing=True)
        return run_id
    await ensure_work_queue(aq, spec.queue)
    args = tick_args(spec, tick)
    now = aq.clock.now()
    deadline = None
    if spec.timeout is not None:
        deadline = now + timedelta(seconds=min(delay + spec.timeout, MAX_DURATION))
    meta = RunMeta(
        workflow=spec.workflow,
        args=args,
        queue=spec.queue,
        started_at=now,
        deadline=deadline,
        trace=started.carrier,
    )
    await aq.transact(produce=start_items(run_id, meta, delay))
    started.created(run_id, spec.workflow, existing=False)
    return run_id


async def trigger_schedule_async(aq: AsyncQueueClient, name: str) -> AsyncRunHandle:
    """See :func:`trigger_schedule`."""
    current = await read_one(aq, name)
    if current is None:
        raise InvalidArgument("name", f"no schedule {name!r}")
    if current.record.spec.target == "task":
        raise InvalidArgument("name", f"{name!r} defers a task: defer it yourself to run it now")
    tick = aq.clock.now()
    key = "trigger:" + tick_key(name, tick)
    run_id = await start_tick(aq, current.record.spec, tick, key)
    await _update(aq, name, lambda s: s.model_copy(update={"last_run_id": run_id}))
    return AsyncRunHandle(aq, run_id)


def trigger_schedule(q: QueueClient, name: str) -> RunHandle:
    """Start a run of ``name`` now (tick = the client clock's now), whatever its
    cron, pause or overlap policy; returns its :class:`RunHandle`."""
    handle = q.call(trigger_schedule_async, q.aio, name)
    return RunHandle(q, handle.run_id)
