"""The clients users import from ``querator``: the queue clients plus ``start``.

The queue layer knows nothing of workflows, so starting a workflow run is added
here, one layer above both (``q.start(fn, ...)`` as in the design).
"""

from __future__ import annotations

from typing import Any

from querator.queue.client import Querator as QueueClient
from querator.queue.service import AsyncQuerator as AsyncQueueClient
from querator.workflows.functions import WorkflowFunction
from querator.workflows.runs import AsyncRunHandle, RunHandle, start, start_async


class AsyncQuerator(AsyncQueueClient):
    """The async client: every queue operation, plus :meth:`start` for workflows."""

    async def start(
        self,
        fn: WorkflowFunction[..., Any],
        /,
        *args: Any,
        idempotency_key: str | None = None,
        queue: str | None = None,
        delay: float = 0.0,
        **kwargs: Any,
    ) -> AsyncRunHandle:
        """Start a run of ``fn(*args, **kwargs)``; see :func:`querator.workflows.start`."""
        return await start_async(
            self, fn, *args, idempotency_key=idempotency_key, queue=queue, delay=delay, **kwargs
        )


class Querator(QueueClient):
    """The sync client: every queue operation, plus :meth:`start` for workflows."""

    _async_class = AsyncQuerator

    def start(
        self,
        fn: WorkflowFunction[..., Any],
        /,
        *args: Any,
        idempotency_key: str | None = None,
        queue: str | None = None,
        delay: float = 0.0,
        **kwargs: Any,
    ) -> RunHandle:
        """Start a run of ``fn(*args, **kwargs)``; see :func:`querator.workflows.start`."""
        return start(
            self, fn, *args, idempotency_key=idempotency_key, queue=queue, delay=delay, **kwargs
        )
