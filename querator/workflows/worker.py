"""Workers: lease wake tasks and step items, replay runs and run steps."""

from __future__ import annotations

import logging
import os
import secrets
import signal
import threading
from collections.abc import Iterable
from types import FrameType
from typing import Any

import anyio
from anyio.lowlevel import EventLoopToken, current_token
from pydantic import ValidationError

from querator.errors import Conflict, InvalidArgument, RequestTimeout
from querator.queue.client import Querator
from querator.queue.models import Leased
from querator.queue.service import AsyncQuerator
from querator.queue.validation import check_count, check_name
from querator.workflows.errors import WorkflowError
from querator.workflows.execute import execute_step
from querator.workflows.functions import StepFunction, WorkflowFunction
from querator.workflows.layout import (
    RESULTS_QUEUE,
    RESULTS_SETTINGS,
    STEP_KIND,
    WAKE_KIND,
    WORK_SETTINGS,
    WORKFLOW_QUEUE,
    StepPayload,
    WakePayload,
)
from querator.workflows.replay import load_history, replay

__all__ = ["AsyncWorker", "Worker"]

log = logging.getLogger("querator.workflows")

Registrable = StepFunction[..., Any] | WorkflowFunction[..., Any]


class Poison(WorkflowError):
    """An item this worker cannot handle: dead-letter it (or drop it)."""


class AsyncWorker:
    """Runs workflows and steps on an :class:`AsyncQuerator`, in async code.

    Leases from the workflow queue(s) of the registered workflows (default
    ``querator.workflows``) and the queues of the registered steps; runs up to
    ``concurrency`` items at a time (each leased queue may hold one more while
    waiting for a slot). :meth:`arun` returns after :meth:`stop`.
    """

    def __init__(
        self,
        aq: AsyncQuerator,
        functions: Iterable[Registrable],
        *,
        concurrency: int = 8,
        client_id: str | None = None,
        poll_timeout: float = 5.0,
    ) -> None:
        self.aq = aq
        self.workflows: dict[str, WorkflowFunction[..., Any]] = {}
        self.steps: dict[str, StepFunction[..., Any]] = {}
        for fn in functions:
            self._register(fn)
        self.queues = sorted(
            {wf.queue or WORKFLOW_QUEUE for wf in self.workflows.values()}
            | {s.queue or WORKFLOW_QUEUE for s in self.steps.values()}
        )
        self.concurrency = check_count("concurrency", concurrency, 1, 10_000)
        self.client_id = check_name(
            "client_id", client_id or f"worker-{os.getpid()}-{secrets.token_hex(4)}"
        )
        self.poll_timeout = poll_timeout
        self._in_flight = 0
        self._stop_requested = False
        self._token: EventLoopToken | None = None
        self._loop_thread = 0

    def _register(self, fn: Registrable) -> None:
        table: dict[str, Any] = self.steps if isinstance(fn, StepFunction) else self.workflows
        if not isinstance(fn, (StepFunction, WorkflowFunction)):
            raise InvalidArgument("functions", f"{fn!r} is neither a @step nor a @workflow")
        if table.get(fn.name, fn) is not fn:
            raise InvalidArgument("functions", f"two functions share the name {fn.name!r}")
        table[fn.name] = fn

    def stop(self) -> None:
        """Stop leasing; :meth:`arun` returns once the items in hand are finished.

        Safe from any thread (and from signal handlers).
        """
        self._stop_requested = True
        token = self._token
        if token is None:
            return  # arun has not started: it will see the request
        if threading.get_ident() == self._loop_thread:
            self._stop.set()
        else:
            anyio.from_thread.run_sync(self._stop.set, token=token)

    async def arun(self) -> None:
        """Serve until :meth:`stop`; in-flight items are finished before returning."""
        self._slots = anyio.Condition()
        self._stop = anyio.Event()
        self._loop_thread = threading.get_ident()
        self._token = current_token()
        if self._stop_requested:
            self._stop.set()
        await self.aq.create_queue(RESULTS_QUEUE, RESULTS_SETTINGS, exist_ok=True)
        for queue in self.queues:
            await self.aq.create_queue(queue, WORK_SETTINGS, exist_ok=True)
        log.info("worker %s serving %s", self.client_id, ", ".join(self.queues))
        async with anyio.create_task_group() as items, anyio.create_task_group() as pollers:
            for queue in self.queues:
                pollers.start_soon(self._poll, queue, items)
            await self._stop.wait()
            pollers.cancel_scope.cancel()
        self._token = None
        log.info("worker %s stopped", self.client_id)

    async def _poll(self, queue: str, items: anyio.abc.TaskGroup) -> None:
        while True:
            async with self._slots:
                while self._in_flight >= self.concurrency:
                    await self._slots.wait()
            try:
                batch = await self.aq.lease(
                    queue, client_id=self.client_id, timeout=self.poll_timeout
                )
            except RequestTimeout:
                continue
            except Exception:
                log.exception("worker %s: lease from %s failed; retrying", self.client_id, queue)
                await anyio.sleep(1.0)
                continue
            for leased in batch:
                self._in_flight += 1
                items.start_soon(self._handle, leased)

    async def _handle(self, leased: Leased) -> None:
        try:
            await self._dispatch(leased)
        except Poison as exc:
            await self._discard(leased, str(exc))
        except Exception:
            log.exception(
                "worker %s: item %s failed; its lease will expire", self.client_id, leased.id
            )
        finally:
            async with self._slots:
                self._in_flight -= 1
                self._slots.notify_all()

    async def _dispatch(self, leased: Leased) -> None:
        if leased.kind == WAKE_KIND:
            await self._wake(leased)
        elif leased.kind == STEP_KIND:
            payload = _decode(StepPayload, leased)
            step = self.steps.get(payload.step)
            if step is None:
                raise Poison(f"unknown step {payload.step!r} (run {payload.run_id})")
            await execute_step(self.aq, leased, payload, step)
        else:
            raise Poison(f"unknown item kind {leased.kind!r}")

    async def _wake(self, leased: Leased) -> None:
        run_id = _decode(WakePayload, leased).run_id
        history = await load_history(self.aq, run_id)
        if history.finished is not None:
            await self.aq.complete(leased.queue, [leased])
            return
        if history.meta is None:
            raise Poison(f"run {run_id} has no stored meta record")
        wf = self.workflows.get(history.meta.workflow)
        if wf is None:
            raise Poison(f"unknown workflow {history.meta.workflow!r} (run {run_id})")
        await replay(self.aq, leased, run_id, wf, history)

    async def _discard(self, leased: Leased, reason: str) -> None:
        try:
            info = await self.aq.get_queue(leased.queue)
            if info.settings.dead_queue:
                await self.aq.retry(leased.queue, [leased], dead=True)
                log.error("poison item %s dead-lettered: %s", leased.id, reason)
            else:
                await self.aq.complete(leased.queue, [leased])
                log.error("poison item %s dropped (no dead queue): %s", leased.id, reason)
        except Conflict as exc:
            log.warning("poison item %s: lease lost before discarding: %s", leased.id, exc)


def _decode(model: type[StepPayload] | type[WakePayload], leased: Leased) -> Any:
    try:
        return model.model_validate_json(leased.payload)
    except ValidationError as exc:
        raise Poison(f"undecodable {leased.kind} payload: {exc.errors()[0]['msg']}") from exc


class Worker:
    """Runs workflows and steps on a sync :class:`Querator` (see :class:`AsyncWorker`).

    :meth:`run` blocks until :meth:`stop`, or SIGTERM/SIGINT when called in the
    main thread.
    """

    def __init__(
        self,
        q: Querator,
        functions: Iterable[Registrable],
        *,
        concurrency: int = 8,
        client_id: str | None = None,
        poll_timeout: float = 5.0,
    ) -> None:
        self.q = q
        self.worker = AsyncWorker(
            q.aio,
            functions,
            concurrency=concurrency,
            client_id=client_id,
            poll_timeout=poll_timeout,
        )

    def run(self) -> None:
        """Serve until :meth:`stop` (or SIGTERM/SIGINT in the main thread)."""
        if threading.current_thread() is not threading.main_thread():
            self.q.call(self.worker.arun)
            return
        handler = self._on_signal
        previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            self.q.call(self.worker.arun)
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        log.info("worker %s: signal %d, stopping", self.worker.client_id, signum)
        threading.Thread(target=self.stop, daemon=True).start()

    def stop(self) -> None:
        """Ask :meth:`run` to return once the items in hand are finished."""
        self.worker.stop()
