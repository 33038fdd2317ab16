"""What a worker serves: its workflows, the steps it runs, and the kinds it leases.

A worker runs the steps it was given, their compensations, and every step
*defined in the process* (found by its persisted name,
:func:`querator.workflows.functions.registered_step`) whose item arrives on
the queue of a workflow it serves: ``Worker(q, [checkout])`` runs ``checkout``
and the steps it calls on its own queue without listing them. A step routed to
another queue (``@step(queue=...)``) goes to the pools that serve that queue.

**Routing.** Wake tasks and step items carry their workflow's or step's name in
their kind (``querator.wake:{workflow}``, ``querator.step:{step}``), and a worker
leases from each queue only the kinds it serves there (:meth:`Served.kinds`):
apps that share a store and a queue never lease each other's items, and an
item nobody serves waits in its queue (see :mod:`querator.workflows.pollers`).
Items written before routing have bare kinds; every worker of the queue leases
those and hands on the ones it does not serve (:mod:`.rerouting`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from querator.errors import InvalidArgument
from querator.tasks.functions import TaskFunction
from querator.tasks.layout import task_kind
from querator.workflows.functions import (
    DurableFunction,
    StepFunction,
    WorkflowFunction,
    registered_step,
    registered_steps,
)
from querator.workflows.keys import STEP_KIND, WAKE_KIND, WORKFLOW_QUEUE, step_kind, wake_kind

__all__ = ["Served"]

LEGACY_KINDS = (STEP_KIND, WAKE_KIND)
"""The bare kinds of items written before routing: leased by every worker of their queue."""


class Served:
    """The functions of one worker, the queues it leases from and the kinds it takes."""

    def __init__(self, functions: Iterable[DurableFunction | TaskFunction[..., Any]]) -> None:
        self.workflows: dict[str, WorkflowFunction[..., Any]] = {}
        self.steps: dict[str, StepFunction[..., Any]] = {}
        self.tasks: dict[str, TaskFunction[..., Any]] = {}
        """The background tasks served (``querator.task:{name}`` items of their queues)."""
        for fn in functions:
            if isinstance(fn, TaskFunction):
                if self.tasks.get(fn.name, fn) is not fn:
                    raise InvalidArgument("functions", f"two tasks share the name {fn.name!r}")
                self.tasks[fn.name] = fn
            else:
                self._register(fn)
        self.task_queues = frozenset(t.queue for t in self.tasks.values())
        """The queues of the served tasks."""
        self.workflow_queues = frozenset(
            wf.queue or WORKFLOW_QUEUE for wf in self.workflows.values()
        )
        """The queues of the served workflows (their wakes, and steps without a queue)."""
        self.queues = sorted(
            self.workflow_queues
            | {s.queue or WORKFLOW_QUEUE for s in self.steps.values()}
            | self.task_queues
        )
        """Every queue the worker leases from."""
        self._kinds: dict[str, tuple[int, tuple[str, ...]]] = {}

    def _register(self, fn: DurableFunction) -> None:
        if not isinstance(fn, StepFunction | WorkflowFunction):
            raise InvalidArgument("functions", f"{fn!r} is not a @step, @workflow or @task")
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

    def names(self, queue: str) -> tuple[list[str], list[str]]:
        """The workflows whose wakes and the steps whose items this worker takes
        from ``queue``, sorted."""
        workflows = sorted(
            name for name, wf in self.workflows.items() if (wf.queue or WORKFLOW_QUEUE) == queue
        )
        steps = set(self.steps)
        if queue in self.workflow_queues:
            steps.update(registered_steps())
        return workflows, sorted(steps)

    def kinds(self, queue: str) -> tuple[str, ...]:
        """The item kinds this worker leases from ``queue`` (sorted; recomputed when
        the process defines more steps)."""
        defined = len(registered_steps())
        cached = self._kinds.get(queue)
        if cached is not None and cached[0] == defined:
            return cached[1]
        workflows, steps = self.names(queue)
        kinds = [wake_kind(name) for name in workflows] + [step_kind(name) for name in steps]
        kinds += [task_kind(name) for name, t in self.tasks.items() if t.queue == queue]
        found = tuple(sorted({*kinds, *LEGACY_KINDS}))
        self._kinds[queue] = (defined, found)
        return found
