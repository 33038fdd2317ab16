"""``@task``: a function run in the background, one leased item per call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, overload

from typing_extensions import Unpack

from querator.errors import InvalidArgument
from querator.queue.client import QueueClient
from querator.queue.options import check_options
from querator.queue.service import AsyncQueueClient
from querator.tasks.deferring import defer, defer_async, defer_many, defer_many_async
from querator.tasks.handles import AsyncTaskHandle, TaskHandle
from querator.tasks.spec import (
    DEFAULT_TASK_RETRY,
    DEFER_OPTIONS,
    TaskOptions,
    TaskSpec,
    registered_task,
)

__all__ = [
    "DEFAULT_TASK_RETRY",
    "DEFER_OPTIONS",
    "TaskFunction",
    "TaskOptions",
    "registered_task",
    "task",
]

P = ParamSpec("P")
R = TypeVar("R")


class TaskFunction(TaskSpec[P, R]):
    """A function decorated with ``@task``.

    Calling it runs it at once, in-process; :meth:`defer` (or :meth:`defer_async`,
    :meth:`defer_many`) stores a call for a worker to run.
    """

    def defer(self, q: QueueClient, /, *args: Any, **kwargs: Any) -> TaskHandle:
        """Store a call for a worker; returns its handle at once.

        ``args``/``kwargs`` are the function's arguments, validated and encoded
        (pydantic, as step arguments) before anything is written: a call that
        does not fit raises InvalidArgument. Keyword options: ``delay``
        (seconds) or ``at`` (an aware datetime) to run it later;
        ``idempotency_key``: a second defer with the same key while the first is
        waiting or running returns its handle and adds nothing; ``connection``:
        the application's open connection (PostgreSQL: psycopg or a SQLAlchemy
        session; SQLite: a ``sqlite3`` connection to the store's file or a
        SQLAlchemy session on it), whose transaction the task then commits (or
        rolls back) with (see :mod:`querator.queue.foreign`); ``priority``
        (-32768 to 32767, default: the task's): among ready items, higher is
        leased first (see docs/flow-control.md).
        """

        return defer(q, self, args, kwargs)

    async def defer_async(
        self, aq: AsyncQueueClient, /, *args: Any, **kwargs: Any
    ) -> AsyncTaskHandle:
        """:meth:`defer` for async code (``connection``: a psycopg
        ``AsyncConnection``, or a ``sqlite3`` connection on SQLite)."""

        return await defer_async(aq, self, args, kwargs)

    def defer_many(self, q: QueueClient, calls: Any, /, **options: Any) -> list[TaskHandle]:
        """Defer many calls in one statement: ``calls`` is a list of
        ``(args, kwargs)`` pairs; ``options`` are :meth:`defer`'s. All or nothing."""

        return defer_many(q, self, calls, options)

    async def defer_many_async(
        self, aq: AsyncQueueClient, calls: Any, /, **options: Any
    ) -> list[AsyncTaskHandle]:
        """:meth:`defer_many` for async code."""

        return await defer_many_async(aq, self, calls, options)

    def handle(self, q: QueueClient, task_id: str, id: str = "") -> TaskHandle:
        """The handle of a call deferred earlier (elsewhere, say), by its
        ``task_id`` (``id``: its item's id, for :meth:`TaskHandle.cancel`)."""

        return TaskHandle(q, self, id, _task_id(task_id))

    def handle_async(self, aq: AsyncQueueClient, task_id: str, id: str = "") -> AsyncTaskHandle:
        """:meth:`handle` for async code."""

        return AsyncTaskHandle(aq, self, id, _task_id(task_id))


def _task_id(task_id: str) -> str:
    if not isinstance(task_id, str) or not 1 <= len(task_id) <= 64:
        raise InvalidArgument("task_id", "must be a task id (a string of 1 to 64 characters)")
    return task_id


@overload
def task(fn: Callable[P, R], /) -> TaskFunction[P, R]: ...


@overload
def task(**options: Unpack[TaskOptions]) -> Callable[[Callable[P, R]], TaskFunction[P, R]]: ...


def task(
    fn: Callable[P, R] | None = None, /, **options: Unpack[TaskOptions]
) -> TaskFunction[P, R] | Callable[[Callable[P, R]], TaskFunction[P, R]]:
    """Make ``fn`` (sync or async) a background task: ``fn.defer(q, ...)`` stores
    one item per call and any worker serving the task runs it.

    ``name`` is the persisted name (default ``module.qualname``); ``queue`` its
    queue (default ``querator.tasks``); ``retry`` the :class:`RetryPolicy`
    (default 3 attempts; None: one attempt; a task may also raise
    :class:`~querator.workflows.Defer` to run again later); ``timeout`` bounds
    one attempt (an async task is cancelled, a sync one fails when it returns
    late); ``lease_timeout`` how long an attempt may go unrenewed (it is renewed
    while it runs); ``keep_result`` stores the outcome for
    :meth:`TaskHandle.result`. A task that fails for good goes to the dead queue
    with its last traceback. See docs/tasks.md.
    """
    check_options("@task", options, TaskOptions)

    def decorate(f: Callable[P, R]) -> TaskFunction[P, R]:
        return TaskFunction(f, **options)

    return decorate(fn) if fn is not None else decorate
