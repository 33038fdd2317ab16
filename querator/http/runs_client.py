"""Workflow runs and schedules over HTTP: the workflow methods of
:class:`querator.http.AsyncQuerator` and its run handle.

Same arguments, return types and exceptions as the library's
(:class:`querator.AsyncQuerator`, :class:`querator.workflows.AsyncRunHandle`);
the server starts a workflow by its persisted name, so it must know it
(``querator serve --app``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, TypeVar

import anyio
from pydantic_core import to_jsonable_python
from typing_extensions import Unpack

from querator.errors import InvalidArgument, RequestTimeout
from querator.http.callers import Poster
from querator.http.durations import format_duration
from querator.http.wire import queue as wq
from querator.http.wire import workflows as ww
from querator.http.wire.types import LONG_POLL_MAX, LONG_POLL_MIN
from querator.queue.options import check_options
from querator.queue.validation import check_count, check_duration, check_flag, check_priority
from querator.workflows.attributes import AttributeValue, check_attributes
from querator.workflows.checking import ReplayCheck
from querator.workflows.cron.api import ScheduleInfo, ScheduleOptions
from querator.workflows.errors import SagaFailed, WorkflowCancelled, WorkflowFailed
from querator.workflows.functions import DurableFunction, WorkflowFunction
from querator.workflows.idempotency import IdReusePolicy, check_reuse_policy
from querator.workflows.inspection import RunInfo
from querator.workflows.messages import _check_signal
from querator.workflows.retention import _check_statuses
from querator.workflows.stored import RunStatus

R = TypeVar("R")


def _named(fn: WorkflowFunction[..., Any] | str) -> str:
    if isinstance(fn, WorkflowFunction):
        return fn.name
    if isinstance(fn, str) and fn:
        return fn
    raise InvalidArgument("fn", f"must be a @workflow function or its persisted name, got {fn!r}")


def _arguments(
    fn: WorkflowFunction[..., Any] | str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """The call's arguments as JSON: checked and encoded by the workflow's own
    codec when the function is given (then all by name), else as plain JSON."""
    if isinstance(fn, WorkflowFunction):
        return {"args": [], "kwargs": json.loads(fn.codec.encode_args(args, kwargs))}
    return {"args": to_jsonable_python(list(args)), "kwargs": to_jsonable_python(kwargs)}


class AsyncHttpRun(Generic[R]):
    """A run of a querator HTTP server, for async code: the methods of
    :class:`querator.workflows.AsyncRunHandle`."""

    def __init__(
        self, client: Poster, run_id: str, workflow: WorkflowFunction[..., Any] | None = None
    ) -> None:
        self.client = client
        self.run_id = run_id
        """The run's id."""
        self.workflow = workflow

    def __repr__(self) -> str:
        return f"<AsyncHttpRun {self.run_id}>"

    async def status(self) -> RunStatus:
        """See :meth:`querator.workflows.AsyncRunHandle.status`."""
        body = {"run_id": self.run_id}
        return (await self.client._post("/v1/runs.get", body, RunInfo)).status

    async def cancel(self, reason: str = "") -> bool:
        """See :meth:`querator.workflows.AsyncRunHandle.cancel`."""
        body = {"run_id": self.run_id, "reason": reason}
        return (await self.client._post("/v1/runs.cancel", body, ww.DoneReply)).changed

    async def retry_compensation(self) -> bool:
        """See :meth:`querator.workflows.AsyncRunHandle.retry_compensation`."""
        body = {"run_id": self.run_id}
        path = "/v1/runs.retry_compensation"
        return (await self.client._post(path, body, ww.DoneReply)).changed

    async def result(self, timeout: float | None = None) -> R:
        """See :meth:`querator.workflows.AsyncRunHandle.result`: long polls of
        at most 15 minutes each until the run ends or ``timeout`` passes."""
        if timeout is not None:
            timeout = check_duration("timeout", timeout, allow_zero=True)
        deadline = None if timeout is None else anyio.current_time() + timeout
        while True:
            left = LONG_POLL_MAX if deadline is None else deadline - anyio.current_time()
            wait = min(max(left, LONG_POLL_MIN + 0.001), LONG_POLL_MAX)
            body = {"run_id": self.run_id, "request_timeout": format_duration(wait)}
            try:
                reply = await self.client._post("/v1/runs.result", body, ww.ResultReply, wait)
            except RequestTimeout:
                if deadline is not None and anyio.current_time() + LONG_POLL_MIN >= deadline:
                    raise RequestTimeout(
                        f"run {self.run_id} did not finish within {timeout}s"
                    ) from None
                continue
            return self._ended(reply)

    def _ended(self, reply: ww.ResultReply) -> R:
        error_type, message = reply.error_type or "Exception", reply.error_message or ""
        if reply.saga and reply.status != "completed":
            ran = tuple(reply.compensations)
            raise SagaFailed(self.run_id, error_type, message, reply.status, ran)
        if reply.status == "cancelled":
            raise WorkflowCancelled(self.run_id, message)
        if reply.status != "completed":
            raise WorkflowFailed(self.run_id, error_type, message)
        if self.workflow is not None:
            decoded: R = self.workflow.codec.decode_result(json.dumps(reply.result))
            return decoded
        value: R = reply.result
        return value


class WorkflowCalls(Poster):
    """The workflow, run and schedule methods of the HTTP client."""

    async def start(
        self,
        fn: WorkflowFunction[..., Any] | str,
        /,
        *args: Any,
        idempotency_key: str | None = None,
        queue: str | None = None,
        delay: float = 0.0,
        id_reuse_policy: IdReusePolicy | None = None,
        priority: int | None = None,
        attributes: Mapping[str, AttributeValue] | None = None,
        eager: bool = False,
        **kwargs: Any,
    ) -> AsyncHttpRun[Any]:
        """See :func:`querator.workflows.start`; ``fn`` may also be the
        workflow's persisted name (its arguments are then sent as plain JSON).
        ``eager`` is checked and ignored: over HTTP the caller holds no
        leases, so the run starts on the workers."""
        check_flag("eager", eager)
        body: dict[str, Any] = {"workflow": _named(fn), **_arguments(fn, args, kwargs)}
        body.update(idempotency_key=idempotency_key, queue=queue)
        if id_reuse_policy is not None:
            body["id_reuse_policy"] = check_reuse_policy(id_reuse_policy)
        if delay:
            body["delay"] = format_duration(check_duration("delay", delay, allow_zero=True))
        if priority is not None:
            body["priority"] = check_priority("priority", priority)
        if attributes is not None:
            body["attributes"] = check_attributes(attributes)
        run_id = (await self._post("/v1/workflows.start", body, ww.RunReply)).run_id
        return AsyncHttpRun(self, run_id, fn if isinstance(fn, WorkflowFunction) else None)

    async def signal_with_start(
        self,
        fn: WorkflowFunction[..., Any] | str,
        /,
        *args: Any,
        signal: tuple[str, Any],
        idempotency_key: str | None = None,
        queue: str | None = None,
        **kwargs: Any,
    ) -> AsyncHttpRun[Any]:
        """See :func:`querator.workflows.signal_with_start`; ``fn`` may also be
        the workflow's persisted name."""
        topic, text = _check_signal(signal)
        body: dict[str, Any] = {"workflow": _named(fn), **_arguments(fn, args, kwargs)}
        body.update(idempotency_key=idempotency_key, queue=queue)
        body["signal"] = {"topic": topic, "value": json.loads(text)}
        run_id = (await self._post("/v1/workflows.start", body, ww.RunReply)).run_id
        return AsyncHttpRun(self, run_id, fn if isinstance(fn, WorkflowFunction) else None)

    def run(self, run_id: str) -> AsyncHttpRun[Any]:
        """The handle of run ``run_id`` (its result is plain JSON)."""
        return AsyncHttpRun(self, run_id)

    async def get_run(self, run_id: str) -> RunInfo:
        """See :func:`querator.workflows.get_run`."""
        return await self._post("/v1/runs.get", {"run_id": run_id}, RunInfo)

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        workflow: str | None = None,
        since: datetime | None = None,
        after: str | None = None,
        limit: int = 100,
        attributes: Mapping[str, AttributeValue] | None = None,
    ) -> list[RunInfo]:
        """See :func:`querator.workflows.list_runs`."""
        body = {
            "attributes": None if attributes is None else check_attributes(attributes),
            "status": status,
            "workflow": workflow,
            "since": since.isoformat() if since else None,
            "after": after,
            "limit": limit,
        }
        return (await self._post("/v1/runs.list", body, ww.ListRunsReply)).runs

    async def resume(self, run_id: str) -> bool:
        """See :func:`querator.workflows.resume`."""
        return (await self._post("/v1/runs.resume", {"run_id": run_id}, ww.DoneReply)).changed

    async def fork(self, run_id: str, from_step: int = 0) -> AsyncHttpRun[Any]:
        """See :func:`querator.workflows.fork`."""
        body = {"run_id": run_id, "from_step": from_step}
        return self.run((await self._post("/v1/runs.fork", body, ww.RunReply)).run_id)

    async def schedule(
        self,
        name: str,
        fn: WorkflowFunction[..., Any] | str,
        *,
        cron: str,
        **options: Unpack[ScheduleOptions],
    ) -> None:
        """See :func:`querator.workflows.schedule`."""
        check_options("schedule", options, ScheduleOptions)
        body: dict[str, Any] = {"name": name, "workflow": _named(fn), "cron": cron}
        for key, given in options.items():
            if key in ("catchup_window", "jitter") and isinstance(given, int | float):
                body[key] = format_duration(float(given))
            else:
                body[key] = to_jsonable_python(given)
        if body.get("kwargs") is None:
            body.pop("kwargs", None)
        await self._post("/v1/schedules.create", body, wq.Reply)

    async def purge_runs(
        self,
        *,
        before: datetime,
        status: RunStatus | Sequence[RunStatus] | None = None,
        workflow: str | None = None,
        limit: int = 1000,
    ) -> int:
        """See :func:`querator.workflows.purge_runs` (an admin token's call)."""
        statuses = None if status is None else list(_check_statuses(status))
        if not isinstance(before, datetime) or before.utcoffset() is None:
            raise InvalidArgument("before", "must be a timezone-aware datetime")
        body: dict[str, Any] = {"before": before.isoformat(), "status": statuses}
        body.update(workflow=workflow, limit=check_count("limit", limit, 1, 100_000))
        return (await self._post("/v1/runs.purge", body, ww.CountReply)).count

    async def reindex_runs(self) -> int:
        """See :func:`querator.workflows.reindex.reindex_runs` (an admin token's
        call): how many runs were seen."""
        return (await self._post("/v1/runs.reindex", {}, ww.CountReply)).count

    async def check_replay(
        self, run_id: str, functions: Iterable[DurableFunction] | None = None
    ) -> ReplayCheck:
        """See :func:`querator.workflows.check_replay`: the server replays the
        run with its own workflow code (``querator serve --app``), so
        ``functions`` must be None. :class:`~querator.errors.InvalidArgument`
        (field ``app``) when the server has no workflow code."""
        if functions is not None:
            raise InvalidArgument(
                "functions",
                "the server replays with its own workflow code (querator serve --app): pass none",
            )
        if not isinstance(run_id, str) or not run_id:
            raise InvalidArgument("run_id", f"must be a run id, got {run_id!r}")
        return await self._post("/v1/runs.replay", {"run_id": run_id}, ReplayCheck)

    async def list_schedules(self) -> list[ScheduleInfo]:
        """See :func:`querator.workflows.list_schedules`."""
        return (await self._post("/v1/schedules.list", {}, ww.SchedulesReply)).schedules

    async def get_schedule(self, name: str) -> ScheduleInfo:
        """See :func:`querator.workflows.get_schedule`: one of ``schedules.list``."""
        for info in await self.list_schedules():
            if info.name == name:
                return info
        raise InvalidArgument("name", f"no schedule {name!r}")

    async def pause_schedule(self, name: str, note: str = "") -> None:
        """See :func:`querator.workflows.pause_schedule`."""
        await self._post("/v1/schedules.pause", {"name": name, "note": note}, wq.Reply)

    async def resume_schedule(self, name: str) -> None:
        """See :func:`querator.workflows.resume_schedule`."""
        await self._post("/v1/schedules.resume", {"name": name}, wq.Reply)

    async def delete_schedule(self, name: str) -> bool:
        """See :func:`querator.workflows.delete_schedule`."""
        return (await self._post("/v1/schedules.delete", {"name": name}, ww.DoneReply)).changed

    async def trigger_schedule(self, name: str) -> AsyncHttpRun[Any]:
        """See :func:`querator.workflows.trigger_schedule`."""
        reply = await self._post("/v1/schedules.trigger", {"name": name}, ww.RunReply)
        return self.run(reply.run_id)
