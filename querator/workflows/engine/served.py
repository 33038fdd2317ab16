"""What a worker serves: its workflows, and the steps it runs.

A worker runs the steps it was given, their compensations, and every step
*defined in the process* (found by its persisted name,
:func:`querator.workflows.functions.registered_step`) whose item arrives on
the queue of a workflow it serves: ``Worker(q, [checkout])`` runs ``checkout``
and the steps it calls on its own queue without listing them. A step routed to
another queue (``@step(queue=...)``) goes to the pools that serve that queue.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from querator.errors import InvalidArgument
from querator.workflows.functions import (
    DurableFunction,
    StepFunction,
    WorkflowFunction,
    registered_step,
)
from querator.workflows.layout import WORKFLOW_QUEUE

__all__ = ["Served"]


class Served:
    """The functions of one worker and the queues it leases from."""

    def __init__(self, functions: Iterable[DurableFunction]) -> None:
        self.workflows: dict[str, WorkflowFunction[..., Any]] = {}
        self.steps: dict[str, StepFunction[..., Any]] = {}
        for fn in functions:
            self._register(fn)
        self.workflow_queues = frozenset(
            wf.queue or WORKFLOW_QUEUE for wf in self.workflows.values()
        )
        """The queues of the served workflows (their wakes, and steps without a queue)."""
        self.queues = sorted(
            self.workflow_queues | {s.queue or WORKFLOW_QUEUE for s in self.steps.values()}
        )
        """Every queue the worker leases from."""

    def _register(self, fn: DurableFunction) -> None:
        if not isinstance(fn, StepFunction | WorkflowFunction):
            raise InvalidArgument("functions", f"{fn!r} is neither a @step nor a @workflow")
        table: dict[str, Any] = self.steps if isinstance(fn, StepFunction) else self.workflows
        if table.get(fn.name, fn) is not fn:
            raise InvalidArgument("functions", f"two functions share the name {fn.name!r}")
        table[fn.name] = fn
        if isinstance(fn, StepFunction) and fn.compensation is not None:
            self._register(fn.compensation)  # a saga step's compensation runs here too

    def step(self, name: str, queue: str) -> StepFunction[..., Any] | None:
        """The step to run for an item of ``queue`` naming ``name`` (None: not here)."""
        found = self.steps.get(name)
        if found is None and queue in self.workflow_queues:
            found = registered_step(name)
        return found

    def can_run(self, name: str, queue: str) -> bool:
        """Whether this worker runs step ``name`` for an item of ``queue`` it leases from."""
        return queue in self.queues and self.step(name, queue) is not None
