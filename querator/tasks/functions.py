"""``@task``: a function run in the background, one leased item per call."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypedDict, TypeVar, overload

from typing_extensions import Unpack

from querator.errors import InvalidArgument
from querator.queue.options import check_options
from querator.queue.validation import check_duration, check_name
from querator.tasks.layout import TASK_QUEUE
from querator.workflows.codec import Codec
from querator.workflows.retry import RetryPolicy

if TYPE_CHECKING:
    from querator.queue.client import QueueClient
    from querator.queue.service import AsyncQueueClient
    from querator.tasks.handles import AsyncTaskHandle, TaskHandle

__all__ = [
    "DEFAULT_TASK_RETRY",
    "DEFER_OPTIONS",
    "TaskFunction",
    "TaskOptions",
    "registered_task",
    "task",
]

DEFAULT_TASK_RETRY = RetryPolicy()
"""Default policy of tasks: 3 attempts, backing off from 1 s (as steps)."""
NO_RETRY = RetryPolicy(max_attempts=1)
"""What ``retry=None`` means: one attempt, never retried."""
DEFER_OPTIONS = ("delay", "at", "idempotency_key", "connection")
"""The keyword options of ``defer``: a task's parameters may not take these names."""

P = ParamSpec("P")
R = TypeVar("R")


class TaskOptions(TypedDict, total=False):
    """The options of ``@task`` (see :func:`task`)."""

    name: str | None
    """The persisted name (default ``module.qualname``: give long-lived tasks one)."""
    queue: str | None
    """The queue its items go to (default :data:`~querator.tasks.layout.TASK_QUEUE`)."""
    retry: RetryPolicy | None
    """Default :data:`DEFAULT_TASK_RETRY`; None: one attempt, never retried."""
    timeout: float | None
    """Seconds one attempt may take (default: no bound)."""
    lease_timeout: float | None
    """Seconds one attempt may go without a renewal (default: the queue's)."""
    keep_result: bool
    """Store the result (or the error) for ``TaskHandle.result()`` (default False)."""


_TASKS: dict[str, TaskFunction[..., Any]] = {}
"""Every task defined in this process by its persisted name (the last one wins)."""


def registered_task(name: str) -> TaskFunction[..., Any] | None:
    """The task defined in this process under the persisted ``name``, if any."""
    return _TASKS.get(name)


class TaskFunction(Generic[P, R]):
    """A function decorated with ``@task``.

    Calling it runs it at once, in-process; :meth:`defer` (or :meth:`defer_async`,
    :meth:`defer_many`) stores a call for a worker to run.
    """

    def __init__(self, fn: Callable[P, R], **options: Unpack[TaskOptions]) -> None:
        check_options("@task", options, TaskOptions)
        self.fn = fn
        name = options.get("name")
        self.name = _persisted(name if name is not None else f"{fn.__module__}.{fn.__qualname__}")
        """The persisted name."""
        queue = options.get("queue")
        self.queue = check_name("queue", queue) if queue is not None else TASK_QUEUE
        """The queue its items go to."""
        retry = options.get("retry", DEFAULT_TASK_RETRY)
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise InvalidArgument("retry", "must be a querator.RetryPolicy or None")
        self.retry = retry if retry is not None else NO_RETRY
        timeout, lease = options.get("timeout"), options.get("lease_timeout")
        self.timeout = check_duration("timeout", timeout) if timeout is not None else None
        self.lease_timeout = check_duration("lease_timeout", lease) if lease is not None else None
        keep = options.get("keep_result", False)
        if not isinstance(keep, bool):
            raise InvalidArgument("keep_result", "must be True or False")
        self.keep_result = keep
        self.is_async = inspect.iscoroutinefunction(fn)
        self.signature = inspect.signature(fn)
        """The function's signature (a worker checks the stored arguments against it)."""
        clash = [p for p in self.signature.parameters if p in DEFER_OPTIONS]
        if clash:
            raise InvalidArgument(
                f"task {self.name!r} parameter {clash[0]!r}",
                f"clashes with defer()'s option of that name; rename it ({', '.join(DEFER_OPTIONS)}"
                " are taken)",
            )
        self.codec = Codec(fn, f"task {self.name!r}")
        functools.update_wrapper(self, fn)
        _TASKS[self.name] = self

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run the function now, in this process (no queue involved)."""
        return self.fn(*args, **kwargs)

    def defer(self, q: QueueClient, /, *args: Any, **kwargs: Any) -> TaskHandle:
        """Store a call for a worker; returns its handle at once.

        ``args``/``kwargs`` are the function's arguments, validated and encoded
        (pydantic, as step arguments) before anything is written: a call that
        does not fit raises InvalidArgument. Keyword options: ``delay``
        (seconds) or ``at`` (an aware datetime) to run it later;
        ``idempotency_key``: a second defer with the same key while the first is
        waiting or running returns its handle and adds nothing; ``connection``
        (PostgreSQL): the application's open psycopg connection or SQLAlchemy
        session, whose transaction the task then commits (or rolls back) with.
        """
        from querator.tasks.deferring import defer

        return defer(q, self, args, kwargs)

    async def defer_async(
        self, aq: AsyncQueueClient, /, *args: Any, **kwargs: Any
    ) -> AsyncTaskHandle:
        """:meth:`defer` for async code (``connection``: a psycopg ``AsyncConnection``)."""
        from querator.tasks.deferring import defer_async

        return await defer_async(aq, self, args, kwargs)

    def defer_many(self, q: QueueClient, calls: Any, /, **options: Any) -> list[TaskHandle]:
        """Defer many calls in one statement: ``calls`` is a list of
        ``(args, kwargs)`` pairs; ``options`` are :meth:`defer`'s. All or nothing."""
        from querator.tasks.deferring import defer_many

        return defer_many(q, self, calls, options)

    async def defer_many_async(
        self, aq: AsyncQueueClient, calls: Any, /, **options: Any
    ) -> list[AsyncTaskHandle]:
        """:meth:`defer_many` for async code."""
        from querator.tasks.deferring import defer_many_async

        return await defer_many_async(aq, self, calls, options)

    def handle(self, q: QueueClient, task_id: str, id: str = "") -> TaskHandle:
        """The handle of a call deferred earlier (elsewhere, say), by its
        ``task_id`` (``id``: its item's id, for :meth:`TaskHandle.cancel`)."""
        from querator.tasks.handles import TaskHandle

        return TaskHandle(q, self, id, _task_id(task_id))

    def handle_async(self, aq: AsyncQueueClient, task_id: str, id: str = "") -> AsyncTaskHandle:
        """:meth:`handle` for async code."""
        from querator.tasks.handles import AsyncTaskHandle

        return AsyncTaskHandle(aq, self, id, _task_id(task_id))

    def __repr__(self) -> str:
        return f"<task {self.name!r}>"


def _task_id(task_id: str) -> str:
    if not isinstance(task_id, str) or not 1 <= len(task_id) <= 64:
        raise InvalidArgument("task_id", "must be a task id (a string of 1 to 64 characters)")
    return task_id


def _persisted(name: str) -> str:
    if not isinstance(name, str) or not 1 <= len(name) <= 512:
        raise InvalidArgument("name", "must be a string of 1 to 512 characters")
    return name


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
