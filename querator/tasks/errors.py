"""Errors of background tasks, under :class:`querator.errors.QueratorError`.

```
QueratorError
└── TaskError            base of the task layer's errors
    ├── TaskFailed       TaskHandle.result(): the task failed for good
    └── TaskTimeout      an attempt outlived its ``@task(timeout=)`` (retried per its policy)
```
"""

from __future__ import annotations

from querator.errors import QueratorError

__all__ = ["TaskError", "TaskFailed", "TaskTimeout"]


class TaskError(QueratorError):
    """Base of the task layer's errors."""


class TaskFailed(TaskError):
    """The task failed for good (its retry policy gave up): ``error_type``,
    ``message`` and ``traceback`` describe its last exception."""

    def __init__(
        self, task_id: str, task: str, error_type: str, message: str, traceback: str | None
    ) -> None:
        self.task_id = task_id
        self.task = task
        self.error_type = error_type
        self.message = message
        self.traceback = traceback
        super().__init__(f"task {task!r} ({task_id}) failed: {error_type}: {message}")


class TaskTimeout(TaskError):
    """One attempt of a task outlived its ``timeout``; retried per its policy."""
