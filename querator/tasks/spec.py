"""What ``@task`` makes of a function before it can be deferred: its name,
queue, retry policy, limits and codec (:class:`TaskSpec`), and the registry of
the tasks defined in this process. :class:`~querator.tasks.functions.TaskFunction`
adds the ``defer`` methods on top, so the deferring and handle modules need
only this one (no import cycle)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypedDict, TypeVar

from typing_extensions import Unpack

from querator.errors import InvalidArgument
from querator.limits.concurrency import Concurrency, limit_keys
from querator.limits.rate import RateLimit
from querator.queue.options import check_options
from querator.queue.validation import check_duration, check_name, check_priority
from querator.tasks.layout import TASK_QUEUE
from querator.workflows.codec import Codec
from querator.workflows.retry import RetryPolicy

__all__ = [
    "DEFAULT_TASK_RETRY",
    "DEFER_OPTIONS",
    "TaskOptions",
    "TaskSpec",
    "registered_task",
]

DEFAULT_TASK_RETRY = RetryPolicy()
"""Default policy of tasks: 3 attempts, backing off from 1 s (as steps)."""
NO_RETRY = RetryPolicy(max_attempts=1)
"""What ``retry=None`` means: one attempt, never retried."""
DEFER_OPTIONS = ("delay", "at", "idempotency_key", "connection", "priority")
"""The keyword options of ``defer``: a task's parameters may not take these names."""

P = ParamSpec("P")
R = TypeVar("R")


class TaskOptions(TypedDict, total=False):
    """The options of ``@task`` (see :func:`~querator.tasks.functions.task`)."""

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
    concurrency: Concurrency | None
    """At most ``limit`` attempts running at once per key, across every worker;
    a call waiting for room is parked and started in arrival order."""
    rate_limit: RateLimit | None
    """At most ``n`` starts per ``per`` seconds and key; a start over it is
    deferred to when it is admitted."""
    priority: int | None
    """The priority of its items (-32768 to 32767, default 0; higher is leased
    first among ready items); ``defer(..., priority=...)`` overrides it."""


_TASKS: dict[str, TaskSpec[..., Any]] = {}
"""Every task defined in this process by its persisted name (the last one wins)."""


def registered_task(name: str) -> TaskSpec[..., Any] | None:
    """The task defined in this process under the persisted ``name``, if any."""
    return _TASKS.get(name)


class TaskSpec(Generic[P, R]):
    """A task's function and options, checked (see :func:`~querator.tasks.functions.task`);
    calling it runs the function at once, in-process."""

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
        priority = options.get("priority")
        self.priority = 0 if priority is None else check_priority("priority", priority)
        """The priority of its items unless a ``defer`` gives one."""
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
        self.concurrency, self.rate_limit = _limits(options)
        functools.update_wrapper(self, fn)
        _TASKS[self.name] = self

    def limit_keys(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, str]:
        """The keys of a call under its concurrency and rate limits ("-" without
        one); :class:`~querator.errors.InvalidArgument` when a key function raises."""
        return limit_keys(self.concurrency, self.rate_limit, args, kwargs)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run the function now, in this process (no queue involved)."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<task {self.name!r}>"


def _limits(options: TaskOptions) -> tuple[Concurrency | None, RateLimit | None]:
    concurrency, rate = options.get("concurrency"), options.get("rate_limit")
    if concurrency is not None and not isinstance(concurrency, Concurrency):
        raise InvalidArgument("concurrency", f"must be a Concurrency, got {concurrency!r}")
    if rate is not None and not isinstance(rate, RateLimit):
        raise InvalidArgument("rate_limit", f"must be a RateLimit, got {rate!r}")
    return concurrency, rate


def _persisted(name: str) -> str:
    if not isinstance(name, str) or not 1 <= len(name) <= 512:
        raise InvalidArgument("name", "must be a string of 1 to 512 characters")
    return name
