"""The clients users import from ``querator``: the queue clients plus
``start`` and ``schedule``.

The queue layer knows nothing of workflows, so starting and scheduling
workflow runs are added here, one layer above both (``q.start(fn, ...)`` and
``q.schedule(name, fn, cron=...)`` as in the design).
"""

from __future__ import annotations

from collections.abc import Coroutine
from datetime import datetime
from typing import Any, TypeVar, overload

from querator.queue.client import Querator as QueueClient
from querator.queue.service import AsyncQuerator as AsyncQueueClient
from querator.workflows.functions import WorkflowFunction
from querator.workflows.runs import AsyncRunHandle, RunHandle, start, start_async
from querator.workflows.schedule_api import schedule, schedule_async

T = TypeVar("T")


class AsyncQuerator(AsyncQueueClient):
    """The async client: every queue operation, plus :meth:`start` for workflows."""

    @overload
    async def start(
        self,
        fn: WorkflowFunction[..., Coroutine[Any, Any, T]],
        /,
        *args: Any,
        idempotency_key: str | None = None,
        queue: str | None = None,
        delay: float = 0.0,
        **kwargs: Any,
    ) -> AsyncRunHandle[T]: ...

    @overload
    async def start(
        self,
        fn: WorkflowFunction[..., T],
        /,
        *args: Any,
        idempotency_key: str | None = None,
        queue: str | None = None,
        delay: float = 0.0,
        **kwargs: Any,
    ) -> AsyncRunHandle[T]: ...

    async def start(
        self,
        fn: WorkflowFunction[..., Any],
        /,
        *args: Any,
        idempotency_key: str | None = None,
        queue: str | None = None,
        delay: float = 0.0,
        **kwargs: Any,
    ) -> AsyncRunHandle[Any]:
        """Start a run of ``fn(*args, **kwargs)``; see :func:`querator.workflows.start`."""
        return await start_async(
            self, fn, *args, idempotency_key=idempotency_key, queue=queue, delay=delay, **kwargs
        )

    async def schedule(
        self,
        name: str,
        fn: WorkflowFunction[..., Any],
        *,
        cron: str,
        tz: str = "UTC",
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
        catchup: str = "skip",
        catchup_window: float = 86_400.0,
        overlap: str = "skip",
        jitter: float = 0.0,
        queue: str | None = None,
        start_at: datetime | None = None,
    ) -> None:
        """Create or redefine a cron schedule; see :func:`querator.workflows.schedule`."""
        await schedule_async(
            self,
            name,
            fn,
            cron=cron,
            tz=tz,
            args=args,
            kwargs=kwargs,
            catchup=catchup,
            catchup_window=catchup_window,
            overlap=overlap,
            jitter=jitter,
            queue=queue,
            start_at=start_at,
        )


class Querator(QueueClient):
    """The sync client: every queue operation, plus :meth:`start` for workflows."""

    _async_class = AsyncQuerator

    @overload
    def start(
        self,
        fn: WorkflowFunction[..., Coroutine[Any, Any, T]],
        /,
        *args: Any,
        idempotency_key: str | None = None,
        queue: str | None = None,
        delay: float = 0.0,
        **kwargs: Any,
    ) -> RunHandle[T]: ...

    @overload
    def start(
        self,
        fn: WorkflowFunction[..., T],
        /,
        *args: Any,
        idempotency_key: str | None = None,
        queue: str | None = None,
        delay: float = 0.0,
        **kwargs: Any,
    ) -> RunHandle[T]: ...

    def start(
        self,
        fn: WorkflowFunction[..., Any],
        /,
        *args: Any,
        idempotency_key: str | None = None,
        queue: str | None = None,
        delay: float = 0.0,
        **kwargs: Any,
    ) -> RunHandle[Any]:
        """Start a run of ``fn(*args, **kwargs)``; see :func:`querator.workflows.start`."""
        return start(
            self, fn, *args, idempotency_key=idempotency_key, queue=queue, delay=delay, **kwargs
        )

    def schedule(
        self,
        name: str,
        fn: WorkflowFunction[..., Any],
        *,
        cron: str,
        tz: str = "UTC",
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
        catchup: str = "skip",
        catchup_window: float = 86_400.0,
        overlap: str = "skip",
        jitter: float = 0.0,
        queue: str | None = None,
        start_at: datetime | None = None,
    ) -> None:
        """Create or redefine a cron schedule; see :func:`querator.workflows.schedule`."""
        schedule(
            self,
            name,
            fn,
            cron=cron,
            tz=tz,
            args=args,
            kwargs=kwargs,
            catchup=catchup,
            catchup_window=catchup_window,
            overlap=overlap,
            jitter=jitter,
            queue=queue,
            start_at=start_at,
        )
