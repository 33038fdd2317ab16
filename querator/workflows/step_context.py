"""What the attempt of a step running now knows, for step kinds built on ``@step``
(``querator.spark``, webhooks) and for step code that wants to stop early.

```python
from querator.workflows import current_step

ctx = current_step()          # None outside a step run by a worker
if ctx is not None and (why := ctx.stop_reason()) is not None:
    raise why                 # the run was cancelled, or is past its deadline
```

:meth:`StepContext.stop_reason` and :meth:`StepContext.run_deadline` block on the
worker's event loop, so call them from the step's own thread (a sync step, or a
thread it started), not from async code on that loop.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import anyio.from_thread

from querator.queue.models import Item
from querator.queue.service import AsyncQueueClient
from querator.workflows.errors import WorkflowCancelled
from querator.workflows.keys import (
    RESULTS_QUEUE,
    aborted_key,
    cancel_key,
    compensating_key,
    meta_key,
)
from querator.workflows.stored import RunMeta

__all__ = ["CURRENT_STEP", "StepContext", "current_step"]


@dataclass(frozen=True)
class StepContext:
    """The attempt of a step item running now (see :func:`current_step`).

    Set by the worker while a step function runs (in the step's thread too).
    """

    aq: AsyncQueueClient
    """The worker's client (on the worker's event loop: see ``token``)."""
    run_id: str
    position: int
    """The step call's position in its run."""
    step: str
    """The step's persisted name."""
    attempt: int
    """1 for the first attempt (failed attempts before deferrals included)."""
    record_key: str
    compensation: bool
    """True when the item is a compensation (it runs even once the run is cancelled)."""
    resources: dict[str, Any] = field(default_factory=dict)
    """The worker's resources by name (shared by its steps; closed when it stops)."""
    token: Any = None
    """The event loop's ``EventLoopToken``, for ``anyio.from_thread`` calls from other threads."""
    deferred: dict[str, list[Item]] = field(default_factory=dict)
    """Tasks this attempt deferred, by queue: produced with the step's record, in
    its transaction (dropped when the attempt fails or defers)."""
    streamed: dict[str, int] = field(default_factory=dict)
    """Values this attempt wrote so far, by stream key (``write_stream`` in a step)."""

    def run_deadline(self) -> datetime | None:
        """The deadline of the step's run (``@workflow(timeout=...)``), if it has one."""
        found = anyio.from_thread.run(
            self.aq.lookup, RESULTS_QUEUE, [meta_key(self.run_id)], token=self.token
        )
        item = found.get(meta_key(self.run_id))
        return RunMeta.model_validate_json(item.payload).deadline if item is not None else None

    def stop_reason(self, deadline: datetime | None = None) -> WorkflowCancelled | None:
        """Why this attempt should stop now: the run was cancelled, its saga is
        compensating, or ``deadline`` (the run's, from :meth:`run_deadline`) passed.
        None: it may go on. A compensation is never asked to stop."""
        if self.compensation:
            return None
        if deadline is not None and self.aq.clock.now() >= deadline:
            return WorkflowCancelled(self.run_id, f"deadline passed; step {self.step!r} cancelled")
        keys = [cancel_key(self.run_id), aborted_key(self.run_id), compensating_key(self.run_id)]
        found = anyio.from_thread.run(self.aq.lookup, RESULTS_QUEUE, keys, token=self.token)
        if any(key in found for key in keys):
            return WorkflowCancelled(self.run_id, f"step {self.step!r} cancelled")
        return None


CURRENT_STEP: ContextVar[StepContext | None] = ContextVar("querator_step", default=None)
"""The running step attempt's :class:`StepContext` (None outside a step item)."""


def current_step() -> StepContext | None:
    """The attempt of the step running in this thread or task (None outside one)."""
    return CURRENT_STEP.get()
