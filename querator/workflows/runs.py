"""Starting runs and watching them: ``start`` / ``start_async`` and run handles."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Literal

import anyio

from querator.errors import InvalidArgument, RequestTimeout
from querator.queue.client import Querator
from querator.queue.service import AsyncQuerator
from querator.queue.validation import check_name
from querator.workflows.errors import WorkflowFailed
from querator.workflows.functions import WorkflowFunction
from querator.workflows.layout import (
    RESULTS_QUEUE,
    RESULTS_SETTINGS,
    WORK_SETTINGS,
    WORKFLOW_QUEUE,
    RunMeta,
    RunRecord,
    meta_key,
    new_run_id,
    record_item,
    result_key,
    wake_item,
)

__all__ = ["AsyncRunHandle", "RunHandle", "RunStatus", "start", "start_async"]

RunStatus = Literal["running", "completed", "failed"]
WAIT_SLICE = 5.0
"""Longest wait between two looks at a run's result (a safety net: wakeups end waits)."""


class AsyncRunHandle:
    """A started run, for async code: its id, status and result."""

    def __init__(
        self, aq: AsyncQuerator, run_id: str, workflow: WorkflowFunction[..., Any] | None = None
    ) -> None:
        self.aq = aq
        self.run_id = run_id
        """The run's id (derived from the idempotency key when one was given)."""
        self.workflow = workflow

    async def _finished(self) -> RunRecord | None:
        found = await self.aq.lookup(RESULTS_QUEUE, [result_key(self.run_id)])
        item = found.get(result_key(self.run_id))
        return RunRecord.model_validate_json(item.payload) if item else None

    async def status(self) -> RunStatus:
        """``"running"``, ``"completed"`` or ``"failed"``; InvalidArgument for an unknown run."""
        keys = [meta_key(self.run_id), result_key(self.run_id)]
        found = await self.aq.lookup(RESULTS_QUEUE, keys)
        if keys[1] in found:
            return (
                "completed"
                if RunRecord.model_validate_json(found[keys[1]].payload).ok
                else "failed"
            )
        if keys[0] in found:
            return "running"
        raise InvalidArgument("run_id", f"no run {self.run_id!r} is stored")

    async def result(self, timeout: float | None = None) -> Any:
        """Wait for the run to end; its result, or :class:`WorkflowFailed`.

        Raises :class:`RequestTimeout` after ``timeout`` seconds (None: wait
        forever). Waiting does not poll: it sleeps until the results queue is
        woken (a record was written by any worker) and then looks once.
        """
        deadline = None if timeout is None else anyio.current_time() + timeout
        watch = self.aq.watch(RESULTS_QUEUE)
        while (record := await self._finished()) is None:
            left = WAIT_SLICE if deadline is None else deadline - anyio.current_time()
            if left <= 0:
                raise RequestTimeout(f"run {self.run_id} did not finish within {timeout}s")
            await watch.wait(min(left, WAIT_SLICE))
        if not record.ok:
            error = record.error
            raise WorkflowFailed(
                self.run_id, error.type if error else "Exception", error.message if error else ""
            )
        assert record.result is not None
        if self.workflow is not None:
            return self.workflow.codec.decode_result(record.result)
        return json.loads(record.result)


class RunHandle:
    """A started run, for sync code (see :class:`AsyncRunHandle`)."""

    def __init__(
        self, q: Querator, run_id: str, workflow: WorkflowFunction[..., Any] | None = None
    ) -> None:
        self.q = q
        self.run_id = run_id
        """The run's id."""
        self._async = AsyncRunHandle(q.aio, run_id, workflow)

    def status(self) -> RunStatus:
        """See :meth:`AsyncRunHandle.status`."""
        return self.q.call(self._async.status)

    def result(self, timeout: float | None = None) -> Any:
        """See :meth:`AsyncRunHandle.result`."""
        return self.q.call(self._async.result, timeout)

    def __repr__(self) -> str:
        return f"<RunHandle {self.run_id}>"


async def start_async(
    aq: AsyncQuerator,
    fn: WorkflowFunction[..., Any],
    *args: Any,
    idempotency_key: str | None = None,
    queue: str | None = None,
    **kwargs: Any,
) -> AsyncRunHandle:
    """Start a run of workflow ``fn`` with these arguments; see :func:`start`."""
    if not isinstance(fn, WorkflowFunction):
        raise InvalidArgument("fn", f"{fn!r} is not a @workflow function")
    if idempotency_key is not None and not idempotency_key:
        raise InvalidArgument("idempotency_key", "must not be empty")
    wf_queue = check_name("queue", queue or fn.queue or WORKFLOW_QUEUE)
    args_text = fn.codec.encode_args(args, kwargs)
    run_id = new_run_id(idempotency_key)
    handle = AsyncRunHandle(aq, run_id, fn)
    await aq.create_queue(RESULTS_QUEUE, RESULTS_SETTINGS, exist_ok=True)
    if meta_key(run_id) in await aq.lookup(RESULTS_QUEUE, [meta_key(run_id)]):
        return handle
    await aq.create_queue(wf_queue, WORK_SETTINGS, exist_ok=True)
    meta = RunMeta(workflow=fn.name, args=args_text, queue=wf_queue, started_at=datetime.now(UTC))
    await aq.transact(
        produce={
            RESULTS_QUEUE: [record_item(meta_key(run_id), meta, run_id)],
            wf_queue: [wake_item(run_id, "start")],
        }
    )
    return handle


def start(
    q: Querator,
    fn: WorkflowFunction[..., Any],
    *args: Any,
    idempotency_key: str | None = None,
    queue: str | None = None,
    **kwargs: Any,
) -> RunHandle:
    """Start a run of workflow ``fn(*args, **kwargs)``; returns its handle at once.

    With ``idempotency_key`` the run id is derived from the key, and starting
    again with the same key returns the existing run (its first arguments win).
    ``queue`` overrides the workflow's queue. Arguments that cannot be
    serialised raise :class:`~querator.errors.InvalidArgument` here.
    """
    handle = q.call(
        start_async, q.aio, fn, *args, idempotency_key=idempotency_key, queue=queue, **kwargs
    )
    return RunHandle(q, handle.run_id, fn)
