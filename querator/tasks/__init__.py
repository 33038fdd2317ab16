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

from querator.tasks.errors import TaskError, TaskFailed, TaskTimeout
from querator.tasks.functions import DEFAULT_TASK_RETRY, TaskFunction, TaskOptions, task
from querator.tasks.handles import AsyncTaskHandle, TaskHandle
from querator.tasks.layout import TASK_DEAD_QUEUE, TASK_QUEUE, TASK_RESULTS_QUEUE

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
    "TaskOptions",
    "TaskTimeout",
    "task",
]
