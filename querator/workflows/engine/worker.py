"""Workers: lease wake tasks and step items and hand them to the engine."""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from functools import partial
from typing import Any, TypedDict

import anyio
from anyio.abc import TaskGroup
from typing_extensions import Unpack

from querator.clock import using
from querator.errors import Conflict, RequestTimeout
from querator.queue.client import QueueClient
from querator.queue.harness import RELEASE_WITHIN, LeaseWorker, run_sync
from querator.queue.models import Leased
from querator.queue.options import check_options
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import check_count, check_duration, check_flag, check_name
from querator.tasks.deferring import ensure_task_queue
from querator.tasks.functions import TaskFunction
from querator.tasks.layout import is_task
from querator.tasks.runner import Hands, TaskRunner
from querator.workflows.cron.scheduler import AsyncScheduler
from querator.workflows.debounce import run_debouncer
from querator.workflows.engine.beacon import Beacon
from querator.workflows.engine.commit import ensure_work_queue
from querator.workflows.engine.driver import Engine
from querator.workflows.engine.execute import StepRunner
from querator.workflows.engine.heartbeat import Heartbeat
from querator.workflows.engine.live import DEFAULT_MAX_LIVE_RUNS
from querator.workflows.engine.poison import Poison, decode, discard
from querator.workflows.engine.rerouting import NotServed, reroute
from querator.workflows.engine.served import Served
from querator.workflows.functions import DurableFunction
from querator.workflows.keys import RESULTS_QUEUE, RESULTS_SETTINGS, is_step, is_wake
from querator.workflows.stored import StepPayload, WakePayload

__all__ = ["RELEASE_WITHIN", "AsyncWorker", "Worker"]

log = logging.getLogger("querator.worker")

DEFAULT_SHUTDOWN_GRACE = 30.0
"""Seconds a stopping worker lets in-flight items finish before releasing them."""
WORKER_SCHEDULER_INTERVAL = 30.0
"""Longest sleep of a worker's scheduler between passes. It wakes at each due
tick and on every schedule change anyway; this bounds only what a missed
wakeup costs, and keeps an idle worker's scheduler near free (measured: about
0.07 store calls a second)."""


class WorkerOptions(TypedDict, total=False):
    """How a worker runs, shared by :class:`AsyncWorker`, :class:`Worker` and
    ``querator worker`` (defaults: :func:`check_worker_options`)."""

    concurrency: int
    """Items handled at once (default 8)."""
    client_id: str | None
    """Lease owner name (default ``worker-<pid>-<random>``)."""
    poll_timeout: float
    """Longest wait of one lease call, in seconds (default 5)."""
    shutdown_grace: float
    """Seconds items in hand may finish after :meth:`AsyncWorker.stop` (default 30)."""
    resources: dict[str, Any] | None
    """Shared by the worker's steps (``StepContext.resources``)."""
    max_live_runs: int
    """Workflow bodies kept live between their steps (default 1000; 0: replay always)."""
    scheduler: bool
    """Fire the cron schedules of the workflows this worker serves (default True;
    any number of workers doing so fire each tick once)."""


def check_worker_options(options: Mapping[str, Any]) -> WorkerOptions:
    """The options with their defaults, checked (InvalidArgument naming the first
    bad one, unknown names included); every option is set in the result."""
    check_options("Worker", options, WorkerOptions)
    client_id = options.get("client_id")
    return {
        "concurrency": check_count("concurrency", options.get("concurrency", 8), 1, 10_000),
        "client_id": check_name("client_id", client_id) if client_id is not None else None,
        "poll_timeout": check_duration("poll_timeout", options.get("poll_timeout", 5.0)),
        "shutdown_grace": check_duration(
            "shutdown_grace", options.get("shutdown_grace", DEFAULT_SHUTDOWN_GRACE), allow_zero=True
        ),
        "resources": options.get("resources"),
        "max_live_runs": check_count(
            "max_live_runs", options.get("max_live_runs", DEFAULT_MAX_LIVE_RUNS), 0, 1_000_000
        ),
        "scheduler": check_flag("scheduler", options.get("scheduler", True)),
    }


class AsyncWorker(LeaseWorker):
    """Runs workflows and steps on an :class:`AsyncQueueClient`, in async code.

    Leases from the workflow queue(s) of the registered workflows (default
    ``querator.workflows``) and the queues of the registered steps; runs up to
    ``concurrency`` items at a time (each leased queue may hold one more while
    waiting for a slot). :meth:`arun` returns after :meth:`stop`.

    Stopping is graceful: leasing stops at once, items in hand may finish for
    up to ``shutdown_grace`` seconds, and whatever is still held then is
    released with ``retry`` (leasable by other workers at once, not after its
    lease expires) and its task cancelled, commits in flight included. What
    cannot be released within :data:`RELEASE_WITHIN` seconds (the store is
    blocked) is left to its lease. A second :meth:`stop` skips what is left of
    the grace period. A sync step's thread cannot be interrupted:
    :meth:`arun` returns when it does, and its late result is dropped (its
    item was released, so its transaction raises ``Conflict``).
    """

    def __init__(
        self,
        aq: AsyncQueueClient,
        functions: Iterable[DurableFunction | TaskFunction[..., Any]],
        **options: Unpack[WorkerOptions],
    ) -> None:
        checked = check_worker_options(options)
        client_id = checked["client_id"] or f"worker-{os.getpid()}-{secrets.token_hex(4)}"
        super().__init__(
            aq,
            log,
            f"worker {client_id}",
            concurrency=checked["concurrency"],
            shutdown_grace=checked["shutdown_grace"],
            renewing="step item",
        )
        self.client_id = client_id
        self.resources: dict[str, Any] = dict(checked.get("resources") or {})
        """Shared by this worker's steps (``StepContext.resources``); each one with a
        ``close()`` method is closed when :meth:`arun` returns (``querator.spark``
        keeps its SparkSession here)."""
        self.served = Served(functions)
        """What this worker runs (see :mod:`querator.workflows.engine.served`)."""
        self.workflows = self.served.workflows
        self.steps = self.served.steps
        self.queues = self.served.queues
        self.poll_timeout = checked["poll_timeout"]
        max_live_runs = checked["max_live_runs"]
        self.scheduler: AsyncScheduler | None = None
        """Fires the schedules of this worker's workflows and tasks (None: option
        ``scheduler`` off, or none served)."""
        if checked["scheduler"] and (self.workflows or self.served.tasks):
            self.scheduler = AsyncScheduler(
                aq,
                [*self.workflows.values(), *self.served.tasks.values()],
                served_only=True,
                interval=WORKER_SCHEDULER_INTERVAL,
            )
        self.retention = {
            w.name: w.retention for w in self.workflows.values() if w.retention is not None
        }
        """Seconds each workflow served (with a ``retention``) keeps its finished runs:
        this worker's heartbeat purges them after (:mod:`querator.workflows.retention`)."""
        self._held: dict[str, Leased] = {}
        self._hands: dict[str, Hands] = {}
        """What this worker lends the task runner, by queue (see :meth:`_hand_over`)."""
        self.beacon = Beacon(aq)
        """Wakes the live run pages after this worker's runs moved."""
        runner = StepRunner(aq, self.renewer, self.resources, lambda: self.token, self.client_id)
        self.tasks = TaskRunner(aq, self.renewer, self.served.tasks, self.client_id)
        """Runs the background tasks served (``querator.task:{name}`` items)."""
        self.engine = Engine(
            aq,
            self.served,
            runner,
            self.client_id,
            max_live_runs,
            lambda: not self.stop_requested,
            self._held,
            self.beacon.poke,
        )
        """Advances this worker's runs and keeps their live bodies (see
        :mod:`querator.workflows.engine.driver`)."""
        self._heartbeat = Heartbeat(
            aq,
            self.client_id,
            lambda: {queue: list(self.served.kinds(queue)) for queue in self.queues},
            self.queues,
            self.retention,
        )
        """This worker's entry in the registry of workers (what it leases)."""
        self.counts = self.engine.counts
        """Since this worker was made: ``leased`` items from its queues;
        ``handed_over``: step items it produced leased to itself and ran at once;
        ``looked_up``: runs whose history it loaded; ``replayed``: bodies it replayed
        from their history (misses); ``resumed``: live bodies a wake resumed;
        ``read_ahead``: wakes of a send that found its message read already
        (:mod:`querator.workflows.engine.read_ahead`)."""

    def stop(self) -> None:
        """Stop leasing; :meth:`arun` returns once the items in hand are finished
        (or released after ``shutdown_grace``). Calling it again hurries: the
        items still in hand are released now.

        Safe from any thread (and from signal handlers).
        """
        super().stop()

    async def arun(self) -> None:
        """Serve until :meth:`stop`, then shut down gracefully (see the class doc)."""
        with using(self.aq.clock):  # records are stamped on the client's clock
            await self._serve()
        counts = ", ".join(f"{name}={count}" for name, count in sorted(self.counts.items()))
        log.info("worker %s stopped (%s)", self.client_id, counts or "nothing done")

    # -- the harness's hooks ---------------------------------------------------
    async def _start(self) -> None:
        await self.aq.create_queue(RESULTS_QUEUE, RESULTS_SETTINGS, exist_ok=True)
        for queue in self.queues:
            if queue in self.served.task_queues and queue not in self.served.workflow_queues:
                await ensure_task_queue(self.aq, queue)
            else:
                await ensure_work_queue(self.aq, queue)
        log.info("worker %s serving %s", self.client_id, ", ".join(self.queues))

    def _poll(self, group: TaskGroup, items: TaskGroup) -> None:
        for queue in self.queues:
            loop = partial(self._lease_loop, share=len(self.queues))
            group.start_soon(loop, queue, items, self._leaser(queue))
        group.start_soon(self._heartbeat.run)  # the registry of workers
        group.start_soon(self.beacon.run)  # live run pages
        if self.scheduler is not None:
            group.start_soon(self.scheduler.arun)
        self.engine.ahead.serve(items)  # recv's reads started by a send's wakeup
        if self.served.workflow_queues:  # debounced starts (workflows/debounce.py)
            group.start_soon(run_debouncer, self.aq, self.client_id, self.poll_timeout)

    def _leaser(self, queue: str) -> Callable[[int], Awaitable[list[Leased]]]:
        """How :meth:`_lease_loop` leases from ``queue`` (the kinds served there only)."""
        kinds = self.served.kinds(queue)

        async def lease(free: int) -> list[Leased]:
            return await self.aq.lease(
                queue,
                client_id=self.client_id,
                batch_size=free,
                timeout=self.poll_timeout,
                kinds=kinds,
            )

        return lease

    def _hand_over(self, batch: list[Leased], items: TaskGroup) -> None:
        tasks = [leased for leased in batch if is_task(leased.kind)]
        if tasks:  # one task for the batch's task items (see TaskRunner.run_batch)
            queue = tasks[0].queue
            hands = self._hands.get(queue)
            if hands is None or hands.group is not items:
                more = self._more(queue) if len(self.queues) == 1 else None
                hands = self._hands[queue] = Hands(items, self._handle_one, self._ran, more)
            items.start_soon(self.tasks.run_batch, tasks, hands)
        if len(tasks) < len(batch):
            for leased in batch:
                if not is_task(leased.kind):
                    items.start_soon(self._handle_one, leased)

    def _ran(self, leased: Leased) -> None:
        """A task item that :meth:`TaskRunner.run_batch` handled is finished."""
        self._held.pop(leased.id, None)
        self._handled()

    def _more(self, queue: str) -> Callable[[int, list[Leased]], Awaitable[list[Leased]]]:
        """How a batch of tasks of ``queue`` that finished completes its items
        and leases as many more in one call (:class:`Hands`'s ``more``). Only for a
        worker that leases from one queue: its slots go on serving that queue,
        and no other queue's lease loop waits for them."""
        kinds = self.served.kinds(queue)

        async def more(count: int, done: list[Leased]) -> list[Leased]:
            if self.stop_requested:
                await self.aq.complete(queue, done)
                return []
            try:
                leased = await self.aq.lease(
                    queue, client_id=self.client_id, batch_size=count, kinds=kinds, complete=done
                )
            except RequestTimeout:  # nothing leasable now: the items stay completed
                return []
            for item in leased:
                self._took_in_hand(item)
            return leased

        return more

    def _took(self, leased: Leased) -> None:
        self.counts["leased"] += 1
        self._held[leased.id] = leased

    async def _stopped_polling(self) -> None:
        self.engine.ahead.stop()
        await self._heartbeat.release()

    async def _drained(self) -> None:
        await self.engine.close()

    async def _closed(self) -> None:
        self.engine.ahead.stop()  # already, unless polling failed
        self.tasks.close()
        await self._close_resources()

    async def _close_resources(self) -> None:
        for name, resource in list(self.resources.items()):
            close = getattr(resource, "close", None)
            if close is None:
                continue
            try:
                await anyio.to_thread.run_sync(close)
            except Exception:
                log.exception("worker %s: could not close resource %r", self.client_id, name)

    async def _release_held(self) -> None:
        released: set[str] = set()
        try:
            await self._release_each(released)
        finally:  # also when RELEASE_WITHIN cut it short
            if left := set(self._held) - released:
                log.warning(
                    "worker %s: %d item(s) still in flight after the grace period"
                    " (a blocked commit?); exiting: their leases will expire",
                    self.client_id,
                    len(left),
                )

    async def _release_each(self, released: set[str]) -> None:
        """Retry every item still in hand so other workers can lease it at once;
        adds to ``released`` the id of each one released or found done.

        A step's lease is renewed while it runs, so the version leased is not
        the current one: the item is looked up by its dedup key and released
        only while this worker still holds it.
        """
        for leased in list(self._held.values()):
            if is_task(leased.kind):  # a task's lease is kept by its runner
                if await self.tasks.release(leased.id):
                    released.add(leased.id)
                continue
            if leased.dedup_key is None:
                continue
            try:
                found = await self.aq.lookup(leased.queue, [leased.dedup_key])
                now = found.get(leased.dedup_key)
                if now is None or now.id != leased.id or now.client_id != self.client_id:
                    released.add(leased.id)
                    continue
                await self.aq.retry(leased.queue, [(now.id, now.version)])
                released.add(leased.id)
                log.info(
                    "worker %s: released item %s (%s) of run %s",
                    self.client_id,
                    leased.id,
                    leased.kind,
                    leased.reference,
                )
            except Conflict:
                released.add(leased.id)  # finished (or lost) meanwhile: nothing to release
            except Exception:
                log.exception("worker %s: could not release item %s", self.client_id, leased.id)

    async def _handle(self, leased: Leased) -> None:
        try:
            await self._dispatch(leased)
        except NotServed as exc:
            await reroute(self.aq, leased, exc)
        except Poison as exc:
            await discard(self.aq, leased, str(exc))
        except Exception:
            log.exception(
                "worker %s: item %s of run %s failed; its lease will expire",
                self.client_id,
                leased.id,
                leased.reference,
            )
        finally:
            self._held.pop(leased.id, None)

    async def _dispatch(self, leased: Leased) -> None:
        if is_task(leased.kind):
            await self.tasks.run(leased)
        elif is_wake(leased.kind):
            await self.engine.wake(leased, decode(WakePayload, leased))
        elif is_step(leased.kind):
            began = time.monotonic()
            payload = decode(StepPayload, leased)
            await self.engine.step(leased, payload)
            log.debug(
                "run %s step %s@%d: handled in %.3fs",
                payload.run_id,
                payload.step,
                payload.position,
                time.monotonic() - began,
            )
        else:
            raise Poison(f"unknown item kind {leased.kind!r}")


class Worker:
    """Runs workflows and steps on a sync :class:`QueueClient` (see :class:`AsyncWorker`).

    :meth:`run` blocks until :meth:`stop`, or SIGTERM/SIGINT when called in the
    main thread: the first signal stops gracefully (see :class:`AsyncWorker`),
    a second one releases the items still in hand at once.
    """

    def __init__(
        self,
        q: QueueClient,
        functions: Iterable[DurableFunction | TaskFunction[..., Any]],
        **options: Unpack[WorkerOptions],
    ) -> None:
        self.q = q
        self.worker = AsyncWorker(q.aio, functions, **options)

    def run(self) -> None:
        """Serve until :meth:`stop` (or SIGTERM/SIGINT in the main thread).

        In the main thread it installs SIGTERM and SIGINT handlers for its
        duration and restores the previous ones before returning.
        """
        run_sync(self.q, self.worker.arun, self.stop, log, f"worker {self.worker.client_id}")

    def stop(self) -> None:
        """Ask :meth:`run` to return once the items in hand are finished (see
        :meth:`AsyncWorker.stop`)."""
        self.worker.stop()
