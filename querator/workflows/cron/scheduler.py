"""The scheduler: a background service that fires the ticks of cron schedules.

Any number of schedulers may run on one store (in workers or on their own).
Each pass reads every schedule, decides with the pure code of
:mod:`querator.workflows.cron.schedules` which ticks to start, buffer or skip, starts
the runs with the idempotency key ``schedule:{name}:{tick UTC ISO}`` (so a tick
starts one run however many schedulers fire it) and records its progress with a
compare-and-set write (:mod:`querator.workflows.cron.store`). A scheduler
whose write loses simply reads again next pass.

Its notion of time is its client's clock (``Querator(..., clock=ManualClock())``
in tests: :mod:`querator.clock`).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

import anyio

from querator.errors import InvalidArgument, Unavailable
from querator.queue.client import QueueClient
from querator.queue.harness import StopRequest, run_sync
from querator.queue.outage import Backoff, Outage
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import check_duration
from querator.tasks.spec import TaskSpec
from querator.workflows.cron.api import make_spec, start_tick, upsert_async
from querator.workflows.cron.schedules import (
    ScheduleSpec,
    ScheduleState,
    check_tz,
    due_ticks,
    jitter_delay,
    next_tick,
    plan_overlap,
    tick_key,
)
from querator.workflows.cron.store import (
    SCHEDULES_QUEUE,
    Stored,
    read_all,
    write,
)
from querator.workflows.cron.task_ticks import fire_task, task_pending
from querator.workflows.errors import RunNotFound
from querator.workflows.functions import WorkflowFunction
from querator.workflows.runs import AsyncRunHandle

__all__ = ["AsyncScheduler", "Scheduler"]

log = logging.getLogger("querator.scheduler")

REFRESH_AFTER = timedelta(days=30)
"""A record older than this is rewritten, so an idle schedule never expires with its queue."""


def _deprecated_now() -> None:
    warnings.warn(
        "Scheduler(now=...) is deprecated and will be removed: give the client a "
        "clock instead (Querator(url, clock=ManualClock(...)), see docs/testing.md)",
        DeprecationWarning,
        stacklevel=3,  # the caller of Scheduler(...) / AsyncScheduler(...)
    )


class AsyncScheduler:
    """Fires due ticks of the schedules in the store (see the module doc).

    ``functions``: workflows decorated with ``@workflow(schedule=...)`` are
    registered (created or redefined) as schedules named after the workflow
    when :meth:`arun` starts (or on :meth:`register`). ``served_only``: fire
    only the schedules of the workflows among ``functions`` (what a worker's
    scheduler does); by default every schedule in the store fires. A stored
    schedule that cannot fire (``ScheduleInfo.broken``) is said once at ERROR
    and skipped. ``interval`` bounds the time between passes (the scheduler
    otherwise sleeps until the next tick or a schedule change). Time is the
    client's clock (:attr:`now`); ``now=`` is deprecated (give the client a
    clock: ``Querator(url, clock=ManualClock(...))``).
    """

    def __init__(
        self,
        aq: AsyncQueueClient,
        functions: Iterable[Any] = (),
        *,
        interval: float = 5.0,
        served_only: bool = False,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self.aq = aq
        listed = list(functions)
        given = [fn for fn in listed if isinstance(fn, WorkflowFunction)]
        self.workflows = [fn for fn in given if fn.schedule]
        tasks = [fn.name for fn in listed if isinstance(fn, TaskSpec)]
        self.served: frozenset[str] | None = (
            frozenset([*(fn.name for fn in given), *tasks]) if served_only else None
        )
        """The workflows and tasks whose schedules fire (None: every schedule)."""
        self._broken_told: dict[str, str] = {}
        self._damaged_told: set[str] = set()
        self.now = aq.clock.now
        """The client's clock: it decides which ticks are due."""
        if now is not None:
            _deprecated_now()
            self.now = now
        self.interval = check_duration("interval", interval)
        self._stops = StopRequest()

    async def register(self) -> None:
        """Create or redefine the schedules of the ``@workflow(schedule=...)`` functions."""
        for fn in self.workflows:
            assert fn.schedule is not None
            spec = make_spec(fn.name, fn, cron=fn.schedule)
            if await upsert_async(self.aq, spec, None):
                log.info("schedule %s registered: %s", spec.name, spec.cron)

    async def run_once(self) -> list[str]:
        """One pass over the schedules it fires at ``now()``; the run ids it
        started (and the task ids it deferred)."""
        started, _ = await self._pass()
        return started

    async def _pass(self) -> tuple[list[str], list[ScheduleState]]:
        """One pass: the run ids started and each schedule's state after it (what
        the wait until the next pass is computed from, without reading again)."""
        started: list[str] = []
        states: list[ScheduleState] = []
        for stored in await self._read():
            state = stored.record
            try:
                run_ids, state = await self._handle(stored)
                started += run_ids
            except InvalidArgument as exc:  # its stored cron or zone cannot fire
                self._tell_broken(stored.record, exc)
            except Exception:
                log.exception("schedule %s: pass failed", state.spec.name)
            states.append(state)
        return started, states

    async def _read(self) -> list[Stored]:
        """The schedules this scheduler fires."""
        every = await read_all(self.aq, self._damaged_told)
        if self.served is None:
            return every
        return [stored for stored in every if stored.record.spec.workflow in self.served]

    def _tell_broken(self, state: ScheduleState, exc: InvalidArgument) -> None:
        """Say once per definition, at ERROR, that a stored schedule cannot fire."""
        spec = state.spec
        seen = f"{spec.cron}|{spec.tz}"
        if self._broken_told.get(spec.name) == seen:
            return
        self._broken_told[spec.name] = seen
        log.error(
            "schedule %s cannot fire and is skipped: %s; redefine it with schedule() "
            "or delete it (querator schedules delete %s)",
            spec.name,
            exc,
            spec.name,
        )

    async def _running(self, spec: ScheduleSpec, run_id: str | None) -> bool:
        if spec.target == "task":
            return await task_pending(self.aq, spec, run_id)
        if run_id is None:
            return False
        try:
            return await AsyncRunHandle(self.aq, run_id).status() == "running"
        except RunNotFound:
            return False

    async def _handle(self, stored: Stored) -> tuple[list[str], ScheduleState]:
        state = stored.record
        if state.paused:
            await self._refresh(stored)
            return [], state
        spec = state.spec
        ticks, last = due_ticks(state, self.now())
        if not ticks and not state.buffered and last == state.last_tick:
            await self._refresh(stored)
            return [], state
        running = await self._running(spec, state.last_run_id)
        plan = plan_overlap(spec.overlap, ticks, state.buffered, running)
        if plan.cancel_previous and state.last_run_id is not None and spec.target == "workflow":
            await AsyncRunHandle(self.aq, state.last_run_id).cancel(
                f"schedule {spec.name}: overlap policy {spec.overlap}"
            )
        run_ids = []
        fire = fire_task if spec.target == "task" else start_tick
        for tick in plan.start:
            delay = jitter_delay(spec.name, tick, spec.jitter)
            run_ids.append(await fire(self.aq, spec, tick, tick_key(spec.name, tick), delay))
        for tick in plan.skipped:
            log.info("schedule %s: tick %s skipped (%s)", spec.name, tick, spec.overlap)
        new = state.model_copy(
            update={
                "last_tick": last,
                "buffered": plan.buffered,
                "last_run_id": run_ids[-1] if run_ids else state.last_run_id,
            }
        )
        if new != state and not await write(self.aq, stored, new):
            log.debug("schedule %s: another scheduler recorded this pass", spec.name)
        return run_ids, new

    async def _refresh(self, stored: Stored) -> None:
        if stored.item.created_at < self.now() - REFRESH_AFTER:
            await write(self.aq, stored, stored.record)

    def _next_due(self, states: list[ScheduleState]) -> float:
        now = self.now()
        wait = self.interval
        for state in states:
            if state.paused:
                continue
            if state.buffered:
                wait = min(wait, 1.0)
            try:
                zone = check_tz(state.spec.tz)
                upcoming = next_tick(state.spec.cron, zone, max(now, state.start_at))
            except InvalidArgument:
                continue  # broken: told by the pass, never waited for
            wait = min(wait, (upcoming - now).total_seconds())
        return max(wait, 0.0)

    async def arun(self) -> None:
        """Register, then pass at every due tick until :meth:`stop`."""
        self._stops.bind()
        try:
            await self._serve()
        finally:
            self._stops.unbind()

    async def _serve(self) -> None:
        try:
            await self.register()  # creates the schedules' queue when it has any to write
        except Exception:
            log.exception("scheduler: registering schedules failed")
        watch = self.aq.watch(SCHEDULES_QUEUE)
        outage, backoff = Outage(log, "scheduler"), Backoff(initial=0.2)
        while not self._stops.stopping.is_set():
            try:
                _, states = await self._pass()
                wait = self._next_due(states)
            except Unavailable as exc:
                outage.lost(exc)  # once per outage; the pass is retried with backoff
                wait = backoff.next()
            except Exception:
                log.exception("scheduler pass failed; retrying")
                wait = 1.0
            else:
                outage.back()
                backoff.reset()
            with anyio.move_on_after(wait + 0.001):
                async with anyio.create_task_group() as group:
                    group.start_soon(self._wait_stop, group)
                    await watch.wait(wait + 0.001)
                    group.cancel_scope.cancel()

    async def _wait_stop(self, group: anyio.abc.TaskGroup) -> None:
        await self._stops.stopping.wait()
        group.cancel_scope.cancel()

    def stop(self) -> None:
        """Make :meth:`arun` return (safe from any thread and from signal handlers)."""
        self._stops.request()


class Scheduler:
    """The sync shell of :class:`AsyncScheduler`: :meth:`run` blocks until :meth:`stop`
    (or SIGTERM/SIGINT when called in the main thread)."""

    def __init__(
        self,
        q: QueueClient,
        functions: Iterable[Any] = (),
        *,
        interval: float = 5.0,
        served_only: bool = False,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self.q = q
        self.scheduler = AsyncScheduler(
            q.aio, functions, interval=interval, served_only=served_only
        )
        if now is not None:
            _deprecated_now()
            self.scheduler.now = now

    def register(self) -> None:
        """See :meth:`AsyncScheduler.register`."""
        self.q.call(self.scheduler.register)

    def run_once(self) -> list[str]:
        """See :meth:`AsyncScheduler.run_once`."""
        started: list[str] = self.q.call(self.scheduler.run_once)
        return started

    def run(self) -> None:
        """See :meth:`AsyncScheduler.arun`; in the main thread SIGTERM and SIGINT
        stop it (their handlers are installed for its duration)."""
        run_sync(self.q, self.scheduler.arun, self.stop, log, "scheduler", hurry=False)

    def stop(self) -> None:
        """See :meth:`AsyncScheduler.stop`."""
        self.scheduler.stop()
