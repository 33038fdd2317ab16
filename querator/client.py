"""The clients users import from ``querator``: the queue clients plus
``start`` and ``schedule``.

The queue layer knows nothing of workflows, so starting and scheduling
workflow runs are added here, one layer above both (``q.start(fn, ...)`` and
``q.schedule(name, fn, cron=...)`` as in the design).
"""

from __future__ import annotations

from typing import Any

from typing_extensions import Unpack

from querator.queue.client import QueueClient
from querator.queue.service import AsyncQueueClient
from querator.workflows.cron.api import ScheduleOptions, schedule, schedule_async
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
        **options: Unpack[ScheduleOptions],
    ) -> None:
        """Create or redefine a cron schedule; see :func:`querator.workflows.schedule`."""
        await schedule_async(self, name, fn, cron=cron, **options)


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
        **options: Unpack[ScheduleOptions],
    ) -> None:
        """Create or redefine a cron schedule; see :func:`querator.workflows.schedule`."""
        schedule(self, name, fn, cron=cron, **options)
