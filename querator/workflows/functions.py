"""``@step`` and ``@workflow``: registered functions with stable persisted names."""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, Generic, ParamSpec, TypedDict, TypeVar, overload

from typing_extensions import Unpack

from querator.errors import InvalidArgument
from querator.limits.concurrency import Concurrency, limit_keys
from querator.limits.rate import RateLimit
from querator.queue.options import check_options
from querator.queue.validation import check_duration, check_name, check_priority
from querator.workflows.attributes import AttributeValue, check_attributes
from querator.workflows.codec import Codec
from querator.workflows.cron.schedules import check_cron
from querator.workflows.engine.context import CURRENT, ChildHandle, ChildSpec, StepHandle, Undo
from querator.workflows.idempotency import IdReusePolicy, check_reuse_policy
from querator.workflows.retry import RetryPolicy
from querator.workflows.stored import ParentClosePolicy

__all__ = [
    "COMPENSATION_RETRY",
    "DEFAULT_RETRY",
    "NO_RETRY",
    "DurableFunction",
    "StepFunction",
    "WorkflowFunction",
    "default_name",
    "registered_step",
    "step",
    "workflow",
]

COMPENSATION_RETRY = RetryPolicy(max_attempts=0, initial=1.0, factor=2.0, max_delay=60.0)
"""Default policy of compensations: retry forever, backing off from 1 s up to 60 s."""
DEFAULT_RETRY = RetryPolicy()
"""Default policy of steps: 3 attempts, backing off from 1 s."""
NO_RETRY = RetryPolicy(max_attempts=1)
"""What ``retry=None`` means: one attempt, never retried."""


class CompensationOptions(TypedDict, total=False):
    """The options of ``@step_fn.compensate`` (and, with one more, of ``@step``)."""

    name: str | None
    """The persisted name (``@step``: :func:`default_name`; a compensation:
    ``f"{step.name}.compensate"``)."""
    retry: RetryPolicy | None
    """``@step``: :data:`DEFAULT_RETRY`; a compensation: :data:`COMPENSATION_RETRY`;
    None: one attempt, never retried."""
    queue: str | None
    """``@step``: the run's workflow queue; a compensation: its step's."""
    lease_timeout: float | None
    """Seconds one attempt may go without a renewal (default: the queue's)."""
    timeout: float | None
    """Seconds one attempt may take (default: no bound)."""


class StepOptions(CompensationOptions, total=False):
    """The options of ``@step`` (see :func:`step`)."""

    concurrency: Concurrency | None
    """At most ``limit`` attempts running at once per key, across every worker;
    a call waiting for room is parked (no worker slot, no thread) and started in
    arrival order (see docs/flow-control.md)."""
    rate_limit: RateLimit | None
    """At most ``n`` starts per ``per`` seconds and key, across every worker; a
    start over it is deferred to when it is admitted."""
    priority: int | None
    """The priority of its items (-32768 to 32767; higher is leased first among
    ready items). None (the default): its run's priority."""

    compensate_on_failure: bool
    """In a ``@saga``: compensate the step even when it failed for good (default False)."""


class WorkflowOptions(TypedDict, total=False):
    """The options of ``@workflow`` and ``@saga`` (see :func:`workflow`)."""

    name: str | None
    queue: str | None
    timeout: float | None
    schedule: str | None
    """``@workflow`` only: a cron expression (UTC) of a schedule named after it."""
    retention: float | None
    """Seconds a finished run is kept before a worker's sweep purges it (None: kept
    until the results queue expires it, 366 days); see :mod:`querator.workflows.retention`."""
    id_reuse_policy: IdReusePolicy | None
    """What a start with an idempotency key does when a run has the key (default
    ``"use_existing"``); see :mod:`querator.workflows.idempotency`."""
    priority: int | None
    """The default priority of its runs (``start(priority=...)`` overrides it;
    None: 0). A run's steps inherit it unless a step sets its own."""


P = ParamSpec("P")
R = TypeVar("R")


def default_name(fn: Callable[..., Any]) -> str:
    """The persisted name of a function without ``name=``: ``module.qualname``.

    Renaming or moving the function changes it: give long-lived steps and
    workflows an explicit ``name=`` so running workflows survive refactoring.
    """
    return f"{fn.__module__}.{fn.__qualname__}"


_STEPS: dict[str, StepFunction[..., Any]] = {}
"""Every step defined in this process by its persisted name (the last one wins)."""


def registered_step(name: str) -> StepFunction[..., Any] | None:
    """The step defined in this process under the persisted ``name``, if any
    (a worker serving a workflow runs the steps found here; see
    :mod:`querator.workflows.engine.served`)."""
    return _STEPS.get(name)


def registered_steps() -> list[str]:
    """The persisted names of every step defined in this process so far."""
    return list(_STEPS)


def _limits(options: StepOptions) -> tuple[Concurrency | None, RateLimit | None]:
    concurrency, rate = options.get("concurrency"), options.get("rate_limit")
    if concurrency is not None and not isinstance(concurrency, Concurrency):
        raise InvalidArgument("concurrency", f"must be a Concurrency, got {concurrency!r}")
    if rate is not None and not isinstance(rate, RateLimit):
        raise InvalidArgument("rate_limit", f"must be a RateLimit, got {rate!r}")
    return concurrency, rate


def _check_persisted_name(name: str) -> str:
    if not isinstance(name, str) or not 1 <= len(name) <= 512:
        raise InvalidArgument("name", "must be a string of 1 to 512 characters")
    return name


class DurableFunction:
    """What a worker serves: a ``@step`` or a ``@workflow`` function.

    The common base of :class:`StepFunction` and :class:`WorkflowFunction`, so a
    list mixing both (``Worker(q, [book_trip, reserve_hotel])``) has a type.
    """

    name: str
    """The persisted name (``name=`` or :func:`default_name`)."""
    queue: str | None
    """The queue its items go to (None: ``querator.workflows``)."""


class StepFunction(DurableFunction, Generic[P, R]):
    """A function decorated with ``@step``.

    Called inside a workflow body, it runs as a leased item of its own (its
    stored result is returned on replay); called anywhere else, it simply runs.
    """

    def __init__(self, fn: Callable[P, R], **options: Unpack[StepOptions]) -> None:
        check_options("@step", options, StepOptions)
        self.fn = fn
        name = options.get("name")
        self.name = _check_persisted_name(name if name is not None else default_name(fn))
        retry = options.get("retry", DEFAULT_RETRY)
        self.retry = retry if retry is not None else NO_RETRY
        self.compensate_on_failure = options.get("compensate_on_failure", False)
        self.compensation: StepFunction[..., Any] | None = None
        """Set by :meth:`compensate`: what undoes this step when its saga fails."""
        queue, lease_timeout = options.get("queue"), options.get("lease_timeout")
        self.queue = check_name("queue", queue) if queue is not None else None
        self.lease_timeout = (
            check_duration("lease_timeout", lease_timeout) if lease_timeout is not None else None
        )
        timeout = options.get("timeout")
        self.timeout = check_duration("timeout", timeout) if timeout is not None else None
        self.is_async = inspect.iscoroutinefunction(fn)
        self.codec = Codec(fn, f"step {self.name!r}")
        self.concurrency, self.rate_limit = _limits(options)
        priority = options.get("priority")
        self.priority = None if priority is None else check_priority("priority", priority)
        """The priority of its items (None: its run's)."""
        functools.update_wrapper(self, fn)
        _STEPS[self.name] = self

    def limit_keys(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, str]:
        """The keys of a call under its concurrency and rate limits ("-" without
        one); :class:`~querator.errors.InvalidArgument` when a key function raises."""
        return limit_keys(self.concurrency, self.rate_limit, args, kwargs)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        ctx = CURRENT.get()
        if ctx is None:
            return self.fn(*args, **kwargs)
        self.limit_keys(args, kwargs)
        value = ctx.call(
            self.name, self.queue, self.codec, args, kwargs, self._undo(), self.priority
        )
        if self.is_async:
            return _resolved(value)  # type: ignore[return-value]
        return value  # type: ignore[no-any-return]

    def spawn(self, *args: P.args, **kwargs: P.kwargs) -> StepHandle[R]:
        """Start this step without waiting; ``gather`` the handles for the results.

        Spawned steps run in parallel, on any worker of the step's queue. Each
        spawn takes the next position of the body, like a call. Outside a
        workflow body the step runs at once (an async step's coroutine is
        awaited by ``gather_async``).
        """
        ctx = CURRENT.get()
        if ctx is None:
            return StepHandle(self.name, -1, self.codec, value=self.fn(*args, **kwargs))
        self.limit_keys(args, kwargs)
        return ctx.spawn(
            self.name, self.queue, self.codec, args, kwargs, self._undo(), self.priority
        )

    @overload
    def compensate(self, fn: Callable[..., Any], /) -> StepFunction[..., Any]: ...

    @overload
    def compensate(
        self, /, **options: Unpack[CompensationOptions]
    ) -> Callable[[Callable[..., Any]], StepFunction[..., Any]]: ...

    def compensate(
        self, fn: Callable[..., Any] | None = None, /, **options: Unpack[CompensationOptions]
    ) -> StepFunction[..., Any] | Callable[[Callable[..., Any]], StepFunction[..., Any]]:
        """Declare ``fn`` as this step's compensation (used when it runs in a ``@saga``).

        ``fn`` receives the step's arguments, then its result (None when the
        step failed and has ``compensate_on_failure``). It runs as a step of its
        own, named ``f"{step.name}.compensate"`` unless ``name=``, with ``retry``
        (default :data:`COMPENSATION_RETRY`: forever, backing off up to 60 s;
        None: one attempt), on ``queue`` (default: the step's); see
        :class:`CompensationOptions`. A worker that registers the step
        registers its compensation too. Returns the compensation as a step.
        """
        check_options("compensate", options, CompensationOptions)

        def decorate(f: Callable[..., Any]) -> StepFunction[..., Any]:
            if self.compensation is not None:
                raise InvalidArgument("compensate", f"step {self.name!r} already has one")
            name, queue = options.get("name"), options.get("queue")
            merged: CompensationOptions = {
                **options,
                "name": name if name is not None else f"{self.name}.compensate",
                "retry": options.get("retry", COMPENSATION_RETRY),
                "queue": queue if queue is not None else self.queue,
            }
            self.compensation = StepFunction(f, **merged)
            return self.compensation

        return decorate(fn) if fn is not None else decorate

    def _undo(self) -> Undo | None:
        comp = self.compensation
        if comp is None:
            return None
        return Undo(comp.name, comp.queue, self.compensate_on_failure, self._undo_args)

    def _undo_args(self, args: tuple[Any, ...], kwargs: dict[str, Any], result: str | None) -> str:
        """The compensation's encoded arguments: the step's (defaults applied), then its result."""
        assert self.compensation is not None
        bound = inspect.signature(self.fn).bind(*args, **kwargs)
        bound.apply_defaults()
        value = self.codec.decode_result(result) if result is not None else None
        return self.compensation.codec.encode_args((*bound.args, value), bound.kwargs)

    def __repr__(self) -> str:
        return f"<step {self.name!r}>"


async def _resolved(value: Any) -> Any:
    return value


class WorkflowFunction(DurableFunction, Generic[P, R]):
    """A function decorated with ``@workflow``: its body is replayed by workers.

    Calling it directly runs the body in-process (steps run inline); use
    ``querator.workflows.start`` to run it durably.
    """

    def __init__(self, fn: Callable[P, R], **options: Unpack[WorkflowOptions]) -> None:
        check_options("@workflow", options, WorkflowOptions)
        name, queue = options.get("name"), options.get("queue")
        timeout, schedule = options.get("timeout"), options.get("schedule")
        self.fn = fn
        self.name = _check_persisted_name(name if name is not None else default_name(fn))
        self.queue = check_name("queue", queue) if queue is not None else None
        self.timeout = check_duration("timeout", timeout) if timeout is not None else None
        self.schedule = check_cron(schedule) if schedule is not None else None
        """Cron expression (UTC) of the schedule a Scheduler registers under ``name``."""
        retention = options.get("retention")
        self.retention = check_duration("retention", retention) if retention is not None else None
        """Seconds a finished run is kept before a worker serving this workflow purges
        it (None: until the results queue expires it, 366 days)."""
        self.id_reuse_policy = check_reuse_policy(options.get("id_reuse_policy"))
        """The default of ``start(id_reuse_policy=...)`` here (None: ``"use_existing"``)."""
        priority = options.get("priority")
        self.priority = 0 if priority is None else check_priority("priority", priority)
        """The default priority of its runs (``start(priority=...)`` overrides it)."""
        self.is_async = inspect.iscoroutinefunction(fn)
        self.codec = Codec(fn, f"workflow {self.name!r}")
        self.parent_close_policy: ParentClosePolicy = "cancel"
        """Run as a child: what its parent's end does to it while it runs (see
        :meth:`with_options`)."""
        self.child_attributes: dict[str, AttributeValue] = {}
        """Run as a child: the search attributes it starts with (see :meth:`with_options`)."""
        functools.update_wrapper(self, fn)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Inside a workflow body: run as a child workflow and wait for its result.

        Elsewhere: run the body in-process.
        """
        ctx = CURRENT.get()
        if ctx is None:
            return self.fn(*args, **kwargs)
        value = ctx.child(self._spec(), args, kwargs)
        if self.is_async:
            return _resolved(value)  # type: ignore[return-value]
        return value  # type: ignore[no-any-return]

    def spawn(self, *args: P.args, **kwargs: P.kwargs) -> ChildHandle[R]:
        """Inside a workflow body: start this workflow as a child run without
        waiting; ``gather`` the handle (beside step handles) for its result.

        The children of one ``gather`` are started together, in the commit that
        parks the body, and run in parallel on any workers serving them; each
        spawn takes the next position of the body, like a call. A child that
        fails makes ``gather`` raise :class:`StepFailed`, as a failed step does.
        Outside a workflow body the body runs at once, in-process (an async
        one's coroutine is awaited by ``gather_async``).
        """
        ctx = CURRENT.get()
        if ctx is None:
            return ChildHandle(self.name, -1, self.codec, value=self.fn(*args, **kwargs))
        return ctx.spawn_child(self._spec(), args, kwargs)

    def with_options(
        self,
        *,
        parent_close_policy: ParentClosePolicy | None = None,
        attributes: Mapping[str, AttributeValue] | None = None,
    ) -> WorkflowFunction[P, R]:
        """This workflow with other options for the child runs started through it
        (``child.with_options(parent_close_policy="abandon").spawn(x)``); an
        option not given keeps its value.

        ``parent_close_policy`` says what becomes of the child, if it still runs,
        when its parent ends without a result (cancelled, failed, timed out):
        ``"cancel"`` (the default) cancels it, ``"abandon"`` lets it run on,
        ``"wait"`` has the parent's end wait for the child's own end (see
        :data:`~querator.workflows.stored.ParentClosePolicy`).

        ``attributes``: the search attributes the child starts with. A child
        holds none of its parent's (as in Temporal): pass those it should be
        found by, e.g. ``attributes={"customer": "acme"}``. Checked here, as
        ``start(attributes=...)`` checks them (:class:`InvalidArgument`).
        """
        other = copy.copy(self)
        if parent_close_policy is not None:
            if parent_close_policy not in ("cancel", "abandon", "wait"):
                raise InvalidArgument(
                    "parent_close_policy",
                    f"must be 'cancel', 'abandon' or 'wait', got {parent_close_policy!r}",
                )
            other.parent_close_policy = parent_close_policy
        if attributes is not None:
            other.child_attributes = check_attributes(attributes)
        return other

    def _spec(self) -> ChildSpec:
        return ChildSpec(
            self.name,
            self.queue,
            self.timeout,
            self.codec,
            self.parent_close_policy,
            self.child_attributes,
        )

    def __repr__(self) -> str:
        return f"<workflow {self.name!r}>"


@overload
def step(fn: Callable[P, R], /) -> StepFunction[P, R]: ...


@overload
def step(**options: Unpack[StepOptions]) -> Callable[[Callable[P, R]], StepFunction[P, R]]: ...


def step(
    fn: Callable[P, R] | None = None, /, **options: Unpack[StepOptions]
) -> StepFunction[P, R] | Callable[[Callable[P, R]], StepFunction[P, R]]:
    """Make ``fn`` a step: each call inside a workflow is a leased item of its own.

    ``name`` is the persisted name (default :func:`default_name`); ``retry`` the
    :class:`RetryPolicy` (default :data:`DEFAULT_RETRY`: 3 attempts; None: one
    attempt, never retried; ``RetryPolicy(max_attempts=0)`` retries FOREVER);
    ``queue`` routes the step to another worker pool (default: the run's workflow
    queue); ``lease_timeout`` is how long one attempt may go without a renewal
    (renewed automatically while the function runs; default: the queue's). ``timeout`` bounds one
    attempt: an async step is cancelled after it, a sync one (which cannot be
    interrupted) fails when it returns late; either way the attempt failed with
    :class:`StepTimeout` and the retry policy decides. In a ``@saga``,
    ``compensate_on_failure`` has the step's compensation (``@fn.compensate``)
    run even when the step failed for good (for steps whose failure may leave
    partial effects); its result is then passed as None.
    """

    check_options("@step", options, StepOptions)

    def decorate(f: Callable[P, R]) -> StepFunction[P, R]:
        return StepFunction(f, **options)

    return decorate(fn) if fn is not None else decorate


@overload
def workflow(fn: Callable[P, R], /) -> WorkflowFunction[P, R]: ...


@overload
def workflow(
    **options: Unpack[WorkflowOptions],
) -> Callable[[Callable[P, R]], WorkflowFunction[P, R]]: ...


def workflow(
    fn: Callable[P, R] | None = None, /, **options: Unpack[WorkflowOptions]
) -> WorkflowFunction[P, R] | Callable[[Callable[P, R]], WorkflowFunction[P, R]]:
    """Make ``fn`` a workflow: a deterministic body that calls steps.

    ``name`` is the persisted name (default :func:`default_name`); ``queue`` is
    where its wake tasks (and its steps without a queue) go (default
    ``querator.workflows``). ``timeout`` (seconds from start) ends a run still
    going then as failed with ``WorkflowTimeout``. Called inside another
    workflow's body, a workflow runs as a child run. ``schedule`` (a cron
    expression, UTC) makes every Scheduler serving it register a schedule named
    after the workflow (see docs/schedules.md). ``retention`` (seconds) is how long
    a finished run is kept: then the workers serving the workflow purge it (see
    :mod:`querator.workflows.retention`; default: until the results queue expires
    it, 366 days). ``id_reuse_policy`` is what a start with an idempotency key does
    when a run has the key (``"use_existing"``, the default;
    ``"allow_duplicate_failed_only"``; ``"reject_duplicate"``; see
    :mod:`querator.workflows.idempotency`).
    """

    check_options("@workflow", options, WorkflowOptions)

    def decorate(f: Callable[P, R]) -> WorkflowFunction[P, R]:
        return WorkflowFunction(f, **options)

    return decorate(fn) if fn is not None else decorate
