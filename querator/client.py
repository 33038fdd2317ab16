"""The clients users import from ``querator``: the queue clients plus
``start`` and ``schedule``.

The queue layer knows nothing of workflows, so starting and scheduling
workflow runs are added here, one layer above both (``q.start(fn, ...)`` and
``q.schedule(name, fn, cron=...)`` as in the design).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from querator.queue.client import Querator as QueueClient
from querator.queue.service import AsyncQuerator as AsyncQueueClient
from querator.workflows.cron.api import schedule, schedule_async
from querator.workflows.functions import WorkflowFunction
from querator.workflows.runs import start, start_async


class AsyncQuerator(AsyncQueueClient):
    """The async client: every queue operation, plus :meth:`start` for workflows."""

    start = start_async
    """Start a run of ``fn(*args, **kwargs)``; see :func:`querator.workflows.start`."""

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

    start = start
    """Start a run of ``fn(*args, **kwargs)``; see :func:`querator.workflows.start`."""

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
