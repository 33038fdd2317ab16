"""How tasks are stored: their queues, item kinds, headers and result records.

A deferred call is **one item** of its task's queue: kind
``querator.task:{name}``, payload the arguments as JSON (the codec of steps),
``reference`` the task id (stable across deferrals), a dedup key only when
the call has an idempotency key. A task that keeps its result writes one
record to :data:`TASK_RESULTS_QUEUE` with the completion of its item.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping

from querator.model_bases import StoredModel
from querator.queue.models import DEFAULT_EXPIRE_TIMEOUT, Item, QueueSettings
from querator.queue.validation import MAX_DURATION

__all__ = [
    "PRIOR_HEADER",
    "TASK_DEAD_QUEUE",
    "TASK_KIND",
    "TASK_QUEUE",
    "TASK_RESULTS_QUEUE",
    "TaskRecord",
    "is_task",
    "result_key",
    "task_id_for",
    "task_kind",
    "task_name",
]

TASK_QUEUE = "querator.tasks"
"""Default queue of tasks (``@task(queue=...)`` routes one elsewhere)."""
TASK_DEAD_QUEUE = "querator.tasks.dead"
"""Dead queue of the task queues querator creates: tasks that failed for good
(with their last traceback), and items no worker could decode."""
TASK_RESULTS_QUEUE = "querator.task-results"
"""Where tasks with ``keep_result=True`` store their outcome."""
TASK_KIND = "querator.task"
"""Kind prefix of task items: ``querator.task:{name}``."""
RESULT_KIND = "querator.task-result"
ENCODING = "json"
PRIOR_HEADER = "querator-task-prior-attempts"
"""Header of a task item made by a deferral: attempts its earlier items used."""
TASK_LEASE = 10.0
"""Seconds a worker holds a task without renewing it (renewed every third of
it while the task runs): a worker that dies is replaced within about this long."""
TASK_SETTINGS = QueueSettings(
    lease_timeout=TASK_LEASE, expire_timeout=MAX_DURATION, dead_queue=TASK_DEAD_QUEUE
)
"""Settings of the task queues querator creates (existing ones are kept). No
``max_attempts``: the task's retry policy decides, the worker dead-letters."""
DEAD_SETTINGS = QueueSettings()
"""Settings of :data:`TASK_DEAD_QUEUE`: dead letters are kept until requeued or purged."""
RESULTS_SETTINGS = QueueSettings(lease_timeout=60.0, expire_timeout=DEFAULT_EXPIRE_TIMEOUT)
"""Kept results expire after this queue's ``expire_timeout`` (7 days unless the
queue was created with another: ``q.update_queue`` changes the retention)."""

_IDEMPOTENT = uuid.UUID("6c0b7e7e-2d39-4c59-9a55-0c8d3c6f1a57")


def task_kind(name: str) -> str:
    """The kind of the items of task ``name`` (a long name: its SHA-256)."""
    kind = f"{TASK_KIND}:{name}"
    if len(kind) <= 512:
        return kind
    return f"{TASK_KIND}:#{hashlib.sha256(name.encode()).hexdigest()}"


def is_task(kind: str) -> bool:
    """Whether ``kind`` is a task item's."""
    return kind.startswith(TASK_KIND + ":")


def task_name(kind: str) -> str:
    """The task name a task item's kind carries."""
    return kind[len(TASK_KIND) + 1 :]


def task_id_for(name: str, idempotency_key: str | None) -> str:
    """A new task id, or the one of ``idempotency_key`` for task ``name`` (the
    same in every process)."""
    if idempotency_key is None:
        return uuid.uuid4().hex
    return uuid.uuid5(_IDEMPOTENT, f"{name}\x00{idempotency_key}").hex


def dedup_key(task_id: str) -> str:
    """The dedup key of an idempotent task's item."""
    return f"task/{task_id}"


def result_key(task_id: str) -> str:
    """The dedup key of a task's result record."""
    return f"task/{task_id}/result"


class TaskRecord(StoredModel):
    """What a task with ``keep_result=True`` stores when it ends."""

    task: str
    """The task's persisted name."""
    ok: bool
    result: str | None = None
    """The result as JSON text (its codec's), when ``ok``."""
    error_type: str | None = None
    message: str | None = None
    traceback: str | None = None
    attempts: int = 1


def record_item(task_id: str, record: TaskRecord) -> Item:
    """The result record of task ``task_id``."""
    return Item(
        payload=record.model_dump_json().encode(),
        kind=RESULT_KIND,
        encoding=ENCODING,
        reference=task_id,
        dedup_key=result_key(task_id),
    )


def prior_attempts(headers: Mapping[str, str]) -> int:
    """Attempts the earlier items of a deferred task used (0 for a first item)."""
    try:
        return max(0, int(headers.get(PRIOR_HEADER, "0")))
    except ValueError:
        return 0
