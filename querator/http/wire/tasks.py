"""Bodies of ``/v1/tasks.*``: defer a task by name, list tasks, read a kept outcome."""

from __future__ import annotations

from typing import Any

from pydantic import Field, StrictInt

from querator.http.wire.types import Duration, QueueName, WireModel
from querator.tasks.layout import TASK_QUEUE
from querator.tasks.listing import TaskInfo


class DeferRequest(WireModel):
    """``/v1/tasks.defer``: a call of task ``name`` (checked by the task's
    signature when the server knows it, ``--app``; else by the worker)."""

    name: str
    """The task's persisted name."""
    args: dict[str, Any] = Field(default_factory=dict)
    """The task's parameters by name (JSON values)."""
    queue: str | None = None
    """The task's queue (default: the task's, else ``querator.tasks``)."""
    delay: Duration | None = None
    """Run it after this long."""
    idempotency_key: str | None = None
    """Defer once while a task with this key waits or runs."""
    priority: StrictInt | None = None
    """The item's priority, -32768 to 32767 (default: the task's when the
    server knows it, else 0)."""


class DeferReply(WireModel):
    """The deferred call: its item's id and its task id."""

    id: str
    task_id: str


class ListTasksRequest(WireModel):
    """``/v1/tasks.list``: tasks waiting, scheduled or running, or failed ones."""

    queue: str = TASK_QUEUE
    failed: bool = False
    """The dead-lettered tasks instead, with why."""
    name: str | None = None
    """Only this task's calls."""
    limit: int = Field(default=1000, ge=1, le=10_000)


class ListTasksReply(WireModel):
    """Tasks, oldest first."""

    tasks: list[TaskInfo]


class TaskStatusRequest(WireModel):
    """``/v1/tasks.status``: the kept outcome of a task (``keep_result=True``)."""

    task_id: str = Field(min_length=1, max_length=64)


class TaskStatusReply(WireModel):
    """``done`` once the task's outcome is stored: ``ok`` with ``result`` (JSON),
    or its error."""

    task_id: str
    done: bool
    ok: bool | None = None
    result: Any = None
    error_type: str | None = None
    message: str | None = None
    attempts: int | None = None


class CancelTaskRequest(WireModel):
    """``/v1/tasks.cancel``: remove a task no worker has started."""

    id: str = Field(min_length=1, max_length=200)
    """The task's item id (``tasks.defer``'s ``id``)."""
    queue: QueueName = TASK_QUEUE
    """The task's queue."""


class CancelTaskReply(WireModel):
    """Whether the task was removed (false: running, done, or never stored here)."""

    cancelled: bool


class RetryTasksRequest(WireModel):
    """``/v1/tasks.retry``: send failed tasks of ``queue`` back, with fresh attempts."""

    queue: QueueName = TASK_QUEUE
    ids: list[str] | None = None
    """Item ids of failed tasks (absent: every failed task of the queue)."""


class RetryTasksReply(WireModel):
    """How many failed tasks were sent back."""

    count: int
