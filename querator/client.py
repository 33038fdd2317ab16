"""The clients users import from ``querator``: the queue clients plus
workflow runs, schedules and webhooks.

The queue layer knows nothing of workflows, so starting, inspecting and
scheduling workflow runs are added here, one layer above both
(``q.start(fn, ...)`` and ``q.schedule(name, fn, cron=...)`` as in the design).
Each method calls the function of :mod:`querator.workflows` (or
:mod:`querator.webhooks`) that holds the operation; together they are the
interface the HTTP clients share (:mod:`querator.interface`).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from typing_extensions import Unpack

from querator.errors import InvalidArgument
from querator.queue import dead_letters as dead
from querator.queue.client import QueueClient
from querator.queue.models import StoredItem
from querator.queue.service import AsyncQueueClient
from querator.workflows import events, messages, streams
from querator.workflows.attributes import AttributeValue
from querator.workflows.checking import ReplayCheck, check_replay, check_replay_async
from querator.workflows.cron import api as cron
from querator.workflows.cron.api import ScheduleInfo, ScheduleOptions, schedule, schedule_async
from querator.workflows.functions import DurableFunction, WorkflowFunction
from querator.workflows.inspection import get_run, get_run_async, list_runs_in_order
from querator.workflows.reindex import reindex_runs, reindex_runs_async
from querator.workflows.rerun import fork, fork_async, resume, resume_async
from querator.workflows.retention import purge_runs, purge_runs_async
from querator.workflows.run_models import RunInfo
from querator.workflows.runs import AsyncRunHandle, RunHandle, start, start_async
from querator.workflows.stored import RunStatus
from querator.workflows.streams import StreamPage, _check_read

if TYPE_CHECKING:
    from querator.webhooks import AsyncWebhooks, Webhooks


def _replay_code(functions: Iterable[DurableFunction] | None) -> list[DurableFunction]:
    if functions is None:
        raise InvalidArgument(
            "functions", "name the workflow code to replay with (the run's workflow among it)"
        )
    return list(functions)


class AsyncQuerator(AsyncQueueClient):
    """The async client: every queue operation, plus workflow runs, schedules
    and webhooks (:class:`querator.interface.AsyncClient`)."""

    start = start_async
    """Start a run of ``fn(*args, **kwargs)``; see :func:`querator.workflows.start`."""

    @functools.cached_property
    def webhooks(self) -> AsyncWebhooks:
        """Webhook endpoints, messages and re-drives, default settings
        (:class:`querator.webhooks.AsyncWebhooks`)."""
        from querator.webhooks import AsyncWebhooks

        return AsyncWebhooks(self)

    async def signal_with_start(
        self,
        fn: WorkflowFunction[..., Any],
        /,
        *args: Any,
        signal: tuple[str, Any],
        idempotency_key: str | None = None,
        queue: str | None = None,
        **kwargs: Any,
    ) -> AsyncRunHandle[Any]:
        """See :func:`querator.workflows.signal_with_start`."""
        return await messages.signal_with_start_async(
            self, fn, *args, signal=signal, idempotency_key=idempotency_key, queue=queue, **kwargs
        )

    def run(self, run_id: str) -> AsyncRunHandle[Any]:
        """The handle of run ``run_id`` (its result is plain JSON)."""
        return AsyncRunHandle(self, run_id)

    async def get_run(self, run_id: str) -> RunInfo:
        """See :func:`querator.workflows.get_run`."""
        return await get_run_async(self, run_id)

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
        return await list_runs_in_order(self, status, workflow, since, after, limit, attributes)

    async def resume(self, run_id: str) -> bool:
        """See :func:`querator.workflows.resume`."""
        return await resume_async(self, run_id)

    async def fork(self, run_id: str, from_step: int = 0) -> AsyncRunHandle[Any]:
        """See :func:`querator.workflows.fork`."""
        return await fork_async(self, run_id, from_step)

    async def schedule(
        self,
        name: str,
        fn: WorkflowFunction[..., Any],
        *,
        cron: str,
        **options: Unpack[ScheduleOptions],
    ) -> None:
        """Create or redefine a cron schedule; see :func:`querator.workflows.schedule`."""
        await schedule_async(self, name, fn, cron=cron, **options)

    async def list_schedules(self) -> list[ScheduleInfo]:
        """See :func:`querator.workflows.list_schedules`."""
        return await cron.list_schedules_async(self)

    async def purge_runs(
        self,
        *,
        before: datetime,
        status: RunStatus | Sequence[RunStatus] | None = None,
        workflow: str | None = None,
        limit: int = 1000,
    ) -> int:
        """See :func:`querator.workflows.purge_runs`."""
        return await purge_runs_async(
            self, before=before, status=status, workflow=workflow, limit=limit
        )

    async def reindex_runs(self) -> int:
        """See :func:`querator.workflows.reindex.reindex_runs`."""
        return await reindex_runs_async(self)

    async def check_replay(
        self, run_id: str, functions: Iterable[DurableFunction] | None = None
    ) -> ReplayCheck:
        """See :func:`querator.workflows.check_replay` (``functions``: the code
        to replay with, the run's workflow among them; required here)."""
        return await check_replay_async(self, run_id, _replay_code(functions))

    async def get_schedule(self, name: str) -> ScheduleInfo:
        """See :func:`querator.workflows.get_schedule`."""
        return await cron.get_schedule_async(self, name)

    async def pause_schedule(self, name: str, note: str = "") -> None:
        """See :func:`querator.workflows.pause_schedule`."""
        await cron.pause_schedule_async(self, name, note)

    async def resume_schedule(self, name: str) -> None:
        """See :func:`querator.workflows.resume_schedule`."""
        await cron.resume_schedule_async(self, name)

    async def delete_schedule(self, name: str) -> bool:
        """See :func:`querator.workflows.delete_schedule`."""
        return await cron.delete_schedule_async(self, name)

    async def trigger_schedule(self, name: str) -> AsyncRunHandle[Any]:
        """See :func:`querator.workflows.trigger_schedule`."""
        return await cron.trigger_schedule_async(self, name)

    async def dead_letters(self, queue: str, limit: int | None = None) -> list[StoredItem]:
        """See :func:`querator.queue.dead_letters.dead_letters_async`."""
        return await dead.dead_letters_async(self, queue, limit)

    async def dead_letter(self, queue: str, item_id: str) -> StoredItem:
        """See :func:`querator.queue.dead_letters.dead_letter_async`."""
        return await dead.dead_letter_async(self, queue, item_id)

    async def requeue(self, queue: str, ids: Sequence[str] | None = None) -> int:
        """See :func:`querator.queue.dead_letters.requeue_async`."""
        return await dead.requeue_async(self, queue, ids)

    async def purge(self, queue: str, ids: Sequence[str] | None = None) -> int:
        """See :func:`querator.queue.dead_letters.purge_async`."""
        return await dead.purge_async(self, queue, ids)

    async def send(
        self, run_id: str, topic: str, value: Any, idempotency_key: str | None = None
    ) -> None:
        """See :func:`querator.workflows.send`."""
        await messages.send_async(self, run_id, topic, value, idempotency_key)

    async def emit_event(self, name: str, payload: Any) -> bool:
        """See :func:`querator.workflows.emit_event`."""
        return await events.emit_event_async(self, name, payload)

    async def get_event(self, run_id: str, key: str, timeout: float = 0.0) -> Any:
        """See :func:`querator.workflows.get_event`."""
        return await messages.get_event_async(self, run_id, key, timeout)

    async def read_stream_page(
        self, run_id: str, key: str, offset: int = 0, timeout: float = 0.0
    ) -> StreamPage:
        """See :func:`querator.workflows.read_stream_page_async`."""
        return await streams.read_stream_page_async(self, run_id, key, offset, timeout)

    def read_stream(self, run_id: str, key: str, offset: int = 0) -> AsyncIterator[Any]:
        """See :func:`querator.workflows.read_stream_async` (the arguments are
        checked here, before iterating)."""
        _check_read(run_id, key, offset)
        return streams.read_stream_async(self, run_id, key, offset)


class Querator(QueueClient):
    """The sync client: every queue operation, plus workflow runs, schedules
    and webhooks (:class:`querator.interface.Client`)."""

    _async_class = AsyncQuerator

    start = start
    """Start a run of ``fn(*args, **kwargs)``; see :func:`querator.workflows.start`."""

    @functools.cached_property
    def webhooks(self) -> Webhooks:
        """Webhook endpoints, messages and re-drives, default settings
        (:class:`querator.webhooks.Webhooks`)."""
        from querator.webhooks import Webhooks

        return Webhooks(self)

    def signal_with_start(
        self,
        fn: WorkflowFunction[..., Any],
        /,
        *args: Any,
        signal: tuple[str, Any],
        idempotency_key: str | None = None,
        queue: str | None = None,
        **kwargs: Any,
    ) -> RunHandle[Any]:
        """See :func:`querator.workflows.signal_with_start`."""
        return messages.signal_with_start(
            self, fn, *args, signal=signal, idempotency_key=idempotency_key, queue=queue, **kwargs
        )

    def run(self, run_id: str) -> RunHandle[Any]:
        """The handle of run ``run_id`` (its result is plain JSON)."""
        return RunHandle(self, run_id)

    def get_run(self, run_id: str) -> RunInfo:
        """See :func:`querator.workflows.get_run`."""
        return get_run(self, run_id)

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
        return self.call(
            list_runs_in_order, self.aio, status, workflow, since, after, limit, attributes
        )

    def resume(self, run_id: str) -> bool:
        """See :func:`querator.workflows.resume`."""
        return resume(self, run_id)

    def fork(self, run_id: str, from_step: int = 0) -> RunHandle[Any]:
        """See :func:`querator.workflows.fork`."""
        return fork(self, run_id, from_step)

    def schedule(
        self,
        name: str,
        fn: WorkflowFunction[..., Any],
        *,
        cron: str,
        **options: Unpack[ScheduleOptions],
    ) -> None:
        """Create or redefine a cron schedule; see :func:`querator.workflows.schedule`."""
        schedule(self, name, fn, cron=cron, **options)

    def list_schedules(self) -> list[ScheduleInfo]:
        """See :func:`querator.workflows.list_schedules`."""
        return cron.list_schedules(self)

    def purge_runs(
        self,
        *,
        before: datetime,
        status: RunStatus | Sequence[RunStatus] | None = None,
        workflow: str | None = None,
        limit: int = 1000,
    ) -> int:
        """See :func:`querator.workflows.purge_runs`."""
        return purge_runs(self, before=before, status=status, workflow=workflow, limit=limit)

    def reindex_runs(self) -> int:
        """See :func:`querator.workflows.reindex.reindex_runs`."""
        return reindex_runs(self)

    def check_replay(
        self, run_id: str, functions: Iterable[DurableFunction] | None = None
    ) -> ReplayCheck:
        """See :meth:`AsyncQuerator.check_replay`."""
        return check_replay(self, run_id, _replay_code(functions))

    def get_schedule(self, name: str) -> ScheduleInfo:
        """See :func:`querator.workflows.get_schedule`."""
        return cron.get_schedule(self, name)

    def pause_schedule(self, name: str, note: str = "") -> None:
        """See :func:`querator.workflows.pause_schedule`."""
        cron.pause_schedule(self, name, note)

    def resume_schedule(self, name: str) -> None:
        """See :func:`querator.workflows.resume_schedule`."""
        cron.resume_schedule(self, name)

    def delete_schedule(self, name: str) -> bool:
        """See :func:`querator.workflows.delete_schedule`."""
        return cron.delete_schedule(self, name)

    def trigger_schedule(self, name: str) -> RunHandle[Any]:
        """See :func:`querator.workflows.trigger_schedule`."""
        return cron.trigger_schedule(self, name)

    def dead_letters(self, queue: str, limit: int | None = None) -> list[StoredItem]:
        """See :func:`querator.queue.dead_letters.dead_letters_async`."""
        return dead.dead_letters(self, queue, limit)

    def dead_letter(self, queue: str, item_id: str) -> StoredItem:
        """See :func:`querator.queue.dead_letters.dead_letter_async`."""
        return dead.dead_letter(self, queue, item_id)

    def requeue(self, queue: str, ids: Sequence[str] | None = None) -> int:
        """See :func:`querator.queue.dead_letters.requeue_async`."""
        return dead.requeue(self, queue, ids)

    def purge(self, queue: str, ids: Sequence[str] | None = None) -> int:
        """See :func:`querator.queue.dead_letters.purge_async`."""
        return dead.purge(self, queue, ids)

    def send(self, run_id: str, topic: str, value: Any, idempotency_key: str | None = None) -> None:
        """See :func:`querator.workflows.send`."""
        messages.send(self, run_id, topic, value, idempotency_key)

    def emit_event(self, name: str, payload: Any) -> bool:
        """See :func:`querator.workflows.emit_event`."""
        return events.emit_event(self, name, payload)

    def get_event(self, run_id: str, key: str, timeout: float = 0.0) -> Any:
        """See :func:`querator.workflows.get_event`."""
        return messages.get_event(self, run_id, key, timeout)

    def read_stream_page(
        self, run_id: str, key: str, offset: int = 0, timeout: float = 0.0
    ) -> StreamPage:
        """See :func:`querator.workflows.read_stream_page_async`."""
        page: StreamPage = self.call(
            streams.read_stream_page_async, self.aio, run_id, key, offset, timeout
        )
        return page

    def read_stream(self, run_id: str, key: str, offset: int = 0) -> Iterator[Any]:
        """See :func:`querator.workflows.read_stream`."""
        return streams.read_stream(self, run_id, key, offset)
