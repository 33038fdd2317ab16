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
import threading
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import anyio
from anyio.lowlevel import EventLoopToken, current_token

from querator.errors import Unavailable
from querator.queue.client import QueueClient
from querator.queue.outage import Backoff, Outage
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import check_duration
from querator.workflows.cron.api import make_spec, start_tick, upsert_async
from querator.workflows.cron.schedules import (
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
    ensure_queue,
    read_all,
    write,
)
from querator.workflows.errors import RunNotFound
from querator.workflows.functions import WorkflowFunction
from querator.workflows.runs import AsyncRunHandle

__all__ = ["AsyncScheduler", "Scheduler"]

log = logging.getLogger("querator.scheduler")

REFRESH_AFTER = timedelta(days=30)
"""A record older than this is rewritten, so an idle schedule never expires with its queue."""


class AsyncScheduler:
    """Fires due ticks of every schedule in the store (see the module doc).

    ``functions``: workflows decorated with ``@workflow(schedule=...)`` are
    registered (created or redefined) as schedules named after the workflow
    when :meth:`arun` starts (or on :meth:`register`). ``interval`` bounds the
    time between passes (the scheduler otherwise sleeps until the next tick or
    a schedule change). Time is the client's clock (:attr:`now`).
    """

    def __init__(
        self,
        aq: AsyncQueueClient,
        functions: Iterable[Any] = (),
        *,
        interval: float = 5.0,
    ) -> None:
        self.aq = aq
        given = [fn for fn in functions if isinstance(fn, WorkflowFunction)]
        self.workflows = [fn for fn in given if fn.schedule]
        self.served = frozenset(fn.name for fn in given)
        """The workflows this scheduler's process runs (empty: a scheduler alone,
        which fires every schedule without judging)."""
        self._orphans_told: set[str] = set()
        self.now = aq.clock.now
        """The client's clock: it decides which ticks are due."""
        self.interval = check_duration("interval", interval)
        self._stop_requested = False
        self._stop: anyio.Event | None = None
        self._token: EventLoopToken | None = None
        self._loop_thread = 0

    async def register(self) -> None:
        """Create or redefine the schedules of the ``@workflow(schedule=...)`` functions."""
        for fn in self.workflows:
            assert fn.schedule is not None
            spec = make_spec(fn.name, fn, cron=fn.schedule)
            if await upsert_async(self.aq, spec, None):
                log.info("schedule %s registered: %s", spec.name, spec.cron)

    async def run_once(self) -> list[str]:
        """One pass over every schedule at ``now()``; the run ids it started."""
        started: list[str] = []
        for stored in await read_all(self.aq):
            try:
                started += await self._handle(stored)
            except Exception:
                log.exception("schedule %s: pass failed", stored.state.spec.name)
        return started

    async def _running(self, run_id: str | None) -> bool:
        if run_id is None:
            return False
        try:
            return await AsyncRunHandle(self.aq, run_id).status() == "running"
        except RunNotFound:
            return False

    async def _handle(self, stored: Stored) -> list[str]:
        state = stored.state
        if state.paused:
            await self._refresh(stored)
            return []
        spec = state.spec
        ticks, last = due_ticks(state, self.now())
        if not ticks and not state.buffered and last == state.last_tick:
            await self._refresh(stored)
            return []
        running = await self._running(state.last_run_id)
        plan = plan_overlap(spec.overlap, ticks, state.buffered, running)
        if plan.cancel_previous and state.last_run_id is not None:
            await AsyncRunHandle(self.aq, state.last_run_id).cancel(
                f"schedule {spec.name}: overlap policy {spec.overlap}"
            )
        if plan.start:
            self._tell_orphan(spec.name, spec.workflow)
        run_ids = []
        for tick in plan.start:
            delay = jitter_delay(spec.name, tick, spec.jitter)
            run_ids.append(await start_tick(self.aq, spec, tick, tick_key(spec.name, tick), delay))
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
        return run_ids

    def _tell_orphan(self, name: str, workflow: str) -> None:
        """Say once, loudly, that this worker fires a schedule of a workflow it
        does not run: unless another worker pool runs it, every run it starts
        waits."""
        if not self.served or workflow in self.served or name in self._orphans_told:
            return
        self._orphans_told.add(name)
        log.error(
            "schedule %s starts workflow %r, which this worker does not serve: its runs "
            "need a worker that does (else they wait in its queue); pause or "
            "delete it with `querator schedules pause|delete %s`",
            name,
            workflow,
            name,
        )

    async def _refresh(self, stored: Stored) -> None:
        if stored.item.created_at < self.now() - REFRESH_AFTER:
            await write(self.aq, stored, stored.state)

    def _next_due(self, states: list[ScheduleState]) -> float:
        now = self.now()
        wait = self.interval
        for state in states:
            if state.paused:
                continue
            if state.buffered:
                wait = min(wait, 1.0)
            after = max(now, state.start_at)
            upcoming = next_tick(state.spec.cron, check_tz(state.spec.tz), after)
            wait = min(wait, (upcoming - now).total_seconds())
        return max(wait, 0.0)

    async def arun(self) -> None:
        """Register, then pass at every due tick until :meth:`stop`."""
        self._stop = anyio.Event()
        self._token = current_token()
        self._loop_thread = threading.get_ident()
        if self._stop_requested:
            self._stop.set()
        await ensure_queue(self.aq)
        try:
            await self.register()
        except Exception:
            log.exception("scheduler: registering schedules failed")
        watch = self.aq.watch(SCHEDULES_QUEUE)
        outage, backoff = Outage(log, "scheduler"), Backoff(initial=0.2)
        while not self._stop.is_set():
            try:
                await self.run_once()
                wait = self._next_due([s.state for s in await read_all(self.aq)])
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
        self._token = None

    async def _wait_stop(self, group: anyio.abc.TaskGroup) -> None:
        assert self._stop is not None
        await self._stop.wait()
        group.cancel_scope.cancel()

    def stop(self) -> None:
        """Make :meth:`arun` return (safe from any thread)."""
        self._stop_requested = True
        token, event = self._token, self._stop
        if token is None or event is None:
            return
        if threading.get_ident() == self._loop_thread:
            event.set()
        else:
            anyio.from_thread.run_sync(event.set, token=token)


class Scheduler:
    """The sync shell of :class:`AsyncScheduler`: :meth:`run` blocks until :meth:`stop`."""

    def __init__(
        self,
        q: QueueClient,
        functions: Iterable[Any] = (),
        *,
        interval: float = 5.0,
    ) -> None:
        self.q = q
        self.scheduler = AsyncScheduler(q.aio, functions, interval=interval)

    def register(self) -> None:
        """See :meth:`AsyncScheduler.register`."""
        self.q.call(self.scheduler.register)

    def run_once(self) -> list[str]:
        """See :meth:`AsyncScheduler.run_once`."""
        started: list[str] = self.q.call(self.scheduler.run_once)
        return started

    def run(self) -> None:
        """See :meth:`AsyncScheduler.arun`."""
        self.q.call(self.scheduler.arun)

    def stop(self) -> None:
        """See :meth:`AsyncScheduler.stop`."""
        self.scheduler.stop()
