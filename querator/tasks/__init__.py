"""Background tasks on the lease queue: ``@task`` + ``defer``, one item per call.

```python
from querator.tasks import task

@task(name="emails.welcome")
def send_welcome(address: str) -> None: ...

send_welcome.defer(q, "ada@example.com")     # one produce; a Worker runs it
```

See docs/tasks.md: retries, ``Defer``, timeouts, dead letters, results,
transactional enqueue (``connection=``) and the worker.
"""

from querator.tasks.deferring import defer_by_name, defer_by_name_async
from querator.tasks.errors import TaskError, TaskFailed, TaskTimeout
from querator.tasks.functions import DEFAULT_TASK_RETRY, TaskFunction, TaskOptions, task
from querator.tasks.handles import AsyncTaskHandle, TaskHandle
from querator.tasks.layout import TASK_DEAD_QUEUE, TASK_QUEUE, TASK_RESULTS_QUEUE
from querator.tasks.listing import TaskInfo, TaskState, list_tasks, list_tasks_async

__all__ = [
    "DEFAULT_TASK_RETRY",
    "TASK_DEAD_QUEUE",
    "TASK_QUEUE",
    "TASK_RESULTS_QUEUE",
    "AsyncTaskHandle",
    "TaskError",
    "TaskFailed",
    "TaskFunction",
    "TaskHandle",
    "TaskInfo",
    "TaskOptions",
    "TaskState",
    "TaskTimeout",
    "defer_by_name",
    "defer_by_name_async",
    "list_tasks",
    "list_tasks_async",
    "task",
]
