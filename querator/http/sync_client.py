"""The sync HTTP client: :class:`querator.Querator`'s methods over HTTP.

It is the library's own sync shell (:class:`~querator.queue.client.SyncShell`:
one private event loop thread, every method forwarding to the async client),
given the HTTP async client: there is one implementation of each call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, TypeVar

from typing_extensions import Unpack

from querator.http.client import DEFAULT_URL, AsyncQuerator
from querator.http.dead_calls import DeadCalls
from querator.http.lock_calls import LockCalls
from querator.http.message_calls import MessageCalls
from querator.http.rate_calls import RateCalls
from querator.http.runs_client import AsyncHttpRun
from querator.http.task_calls import TaskCalls
from querator.http.webhooks_client import HttpWebhooks
from querator.queue.client import SyncShell
from querator.workflows.attributes import AttributeValue
from querator.workflows.checking import ReplayCheck
from querator.workflows.cron.api import ScheduleInfo, ScheduleOptions
from querator.workflows.functions import DurableFunction, WorkflowFunction
from querator.workflows.idempotency import IdReusePolicy
from querator.workflows.inspection import RunInfo
from querator.workflows.stored import RunStatus

R = TypeVar("R")


class HttpRun(Generic[R]):
    """A run of a querator HTTP server, for sync code: the methods of
    :class:`querator.RunHandle`."""

    def __init__(self, q: Querator, run: AsyncHttpRun[R]) -> None:
        self.q = q
        self.run_id = run.run_id
        """The run's id."""
        self._async = run

    def __repr__(self) -> str:
        return f"<HttpRun {self.run_id}>"

    def status(self) -> RunStatus:
        """See :meth:`querator.workflows.AsyncRunHandle.status`."""
        return self.q.call(self._async.status)

    def result(self, timeout: float | None = None) -> R:
        """See :meth:`querator.workflows.AsyncRunHandle.result`."""
        return self.q.call(self._async.result, timeout)

    def cancel(self, reason: str = "") -> bool:
        """See :meth:`querator.workflows.AsyncRunHandle.cancel`."""
        return self.q.call(self._async.cancel, reason)

    def retry_compensation(self) -> bool:
        """See :meth:`querator.workflows.AsyncRunHandle.retry_compensation`."""
        return self.q.call(self._async.retry_compensation)


class Querator(MessageCalls, LockCalls, RateCalls, TaskCalls, DeadCalls, SyncShell[AsyncQuerator]):
    """A client of a querator HTTP server, for ordinary (sync) code.

    ``Querator(url, token=None, timeout=30.0, encoding="json", namespace=None)``:
    same methods, return types and exceptions as :class:`querator.Querator`
    (``encoding`` and ``namespace``: see :class:`AsyncQuerator`).
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        encoding: str = "json",
        namespace: str | None = None,
    ) -> None:
        options: dict[str, Any] = {"token": token, "timeout": timeout, "encoding": encoding}
        options["namespace"] = namespace
        AsyncQuerator(url, **options)  # bad input: here
        super().__init__(lambda: AsyncQuerator(url, **options))
        self.namespace = namespace
        """The namespace the calls are for (None: the server's own)."""
        self.webhooks = HttpWebhooks(self)
        """Webhook endpoints, messages and re-drives (``Webhooks``'s methods)."""

    def start(
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
    ) -> HttpRun[Any]:
        """See :meth:`AsyncQuerator.start`."""
        run = self._call(
            self._async.start,
            fn,
            *args,
            idempotency_key=idempotency_key,
            queue=queue,
            delay=delay,
            id_reuse_policy=id_reuse_policy,
            priority=priority,
            attributes=attributes,
            eager=eager,
            **kwargs,
        )
        return HttpRun(self, run)

    def signal_with_start(
        self,
        fn: WorkflowFunction[..., Any] | str,
        /,
        *args: Any,
        signal: tuple[str, Any],
        idempotency_key: str | None = None,
        queue: str | None = None,
        **kwargs: Any,
    ) -> HttpRun[Any]:
        """See :meth:`AsyncQuerator.signal_with_start`."""
        run = self._call(
            self._async.signal_with_start,
            fn,
            *args,
            signal=signal,
            idempotency_key=idempotency_key,
            queue=queue,
            **kwargs,
        )
        return HttpRun(self, run)

    def run(self, run_id: str) -> HttpRun[Any]:
        """The handle of run ``run_id`` (its result is plain JSON)."""
        return HttpRun(self, self._async.run(run_id))

    def get_run(self, run_id: str) -> RunInfo:
        """See :func:`querator.workflows.get_run`."""
        return self._call(self._async.get_run, run_id)

    def list_runs(
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
        return self._call(
            self._async.list_runs,
            attributes=attributes,
            status=status,
            workflow=workflow,
            since=since,
            after=after,
            limit=limit,
        )

    def resume(self, run_id: str) -> bool:
        """See :func:`querator.workflows.resume`."""
        return self._call(self._async.resume, run_id)

    def fork(self, run_id: str, from_step: int = 0) -> HttpRun[Any]:
        """See :func:`querator.workflows.fork`."""
        return HttpRun(self, self._call(self._async.fork, run_id, from_step))

    def schedule(
        self,
        name: str,
        fn: WorkflowFunction[..., Any] | str,
        *,
        cron: str,
        **options: Unpack[ScheduleOptions],
    ) -> None:
        """See :func:`querator.workflows.schedule`."""
        self._call(self._async.schedule, name, fn, cron=cron, **options)

    def purge_runs(
        self,
        *,
        before: datetime,
        status: RunStatus | Sequence[RunStatus] | None = None,
        workflow: str | None = None,
        limit: int = 1000,
    ) -> int:
        """See :meth:`AsyncQuerator.purge_runs`."""
        return self._call(
            self._async.purge_runs, before=before, status=status, workflow=workflow, limit=limit
        )

    def reindex_runs(self) -> int:
        """See :meth:`AsyncQuerator.reindex_runs`."""
        return self._call(self._async.reindex_runs)

    def check_replay(
        self, run_id: str, functions: Iterable[DurableFunction] | None = None
    ) -> ReplayCheck:
        """See :meth:`AsyncQuerator.check_replay`."""
        return self._call(self._async.check_replay, run_id, functions)

    def list_schedules(self) -> list[ScheduleInfo]:
        """See :func:`querator.workflows.list_schedules`."""
        return self._call(self._async.list_schedules)

    def get_schedule(self, name: str) -> ScheduleInfo:
        """See :meth:`AsyncQuerator.get_schedule`."""
        return self._call(self._async.get_schedule, name)

    def pause_schedule(self, name: str, note: str = "") -> None:
        """See :func:`querator.workflows.pause_schedule`."""
        self._call(self._async.pause_schedule, name, note)

    def resume_schedule(self, name: str) -> None:
        """See :func:`querator.workflows.resume_schedule`."""
        self._call(self._async.resume_schedule, name)

    def delete_schedule(self, name: str) -> bool:
        """See :func:`querator.workflows.delete_schedule`."""
        return self._call(self._async.delete_schedule, name)

    def trigger_schedule(self, name: str) -> HttpRun[Any]:
        """See :func:`querator.workflows.trigger_schedule`."""
        return HttpRun(self, self._call(self._async.trigger_schedule, name))
