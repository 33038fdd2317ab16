"""Calls made inside a workflow body besides steps: durable timers and gather.

Each takes a position of the body like a step call and is replayed from its
record. Outside a workflow body they act like their ordinary counterparts
(``time.sleep``, running the handles' values).

In an **async** workflow the plain forms work too (replay never blocks); the
``a``-prefixed coroutines are there so the body reads naturally with ``await``.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Coroutine, Iterable
from datetime import UTC, datetime
from typing import Any, NoReturn, TypeVar, overload

import anyio
from typing_extensions import deprecated

from querator.errors import InvalidArgument, UsageError
from querator.queue.validation import check_duration
from querator.workflows.engine.context import CURRENT, StepHandle
from querator.workflows.engine.fiber import park
from querator.workflows.engine.successor import ContinueAsNew

__all__ = [
    "agather",
    "asleep",
    "asleep_until",
    "continue_as_new",
    "continue_as_new_async",
    "gather",
    "gather_async",
    "sleep",
    "sleep_async",
    "sleep_until",
    "sleep_until_async",
]

T = TypeVar("T")


def _aware(until: datetime) -> datetime:
    if until.tzinfo is None or until.utcoffset() is None:
        raise InvalidArgument("until", "must be a timezone-aware datetime")
    return until.astimezone(UTC)


def sleep(seconds: float) -> None:
    """Durable timer: the run resumes after ``seconds`` (survives restarts).

    The end instant is computed once, when the body first reaches the call, and
    stored; replays before it suspend again, replays after it return at once.
    No worker is held while the run sleeps: a wake task is scheduled for the end.
    """
    seconds = check_duration("seconds", seconds, allow_zero=True)
    ctx = CURRENT.get()
    if ctx is None:
        time.sleep(seconds)
        return
    ctx.sleep(seconds)


def sleep_until(until: datetime) -> None:
    """Durable timer until the timezone-aware instant ``until`` (see :func:`sleep`)."""
    until = _aware(until)
    ctx = CURRENT.get()
    if ctx is None:
        time.sleep(max(0.0, (until - datetime.now(UTC)).total_seconds()))
        return
    ctx.sleep_until(until)


async def sleep_async(seconds: float) -> None:
    """:func:`sleep` for async workflow bodies (``await sleep_async(5)``)."""
    seconds = check_duration("seconds", seconds, allow_zero=True)
    if CURRENT.get() is None:
        await anyio.sleep(seconds)
        return
    sleep(seconds)


async def sleep_until_async(until: datetime) -> None:
    """:func:`sleep_until` for async workflow bodies."""
    if CURRENT.get() is None:
        await anyio.sleep(max(0.0, (_aware(until) - datetime.now(UTC)).total_seconds()))
        return
    sleep_until(until)


def gather(handles: Iterable[StepHandle[T]]) -> list[T]:
    """The results of spawned steps, in the order of ``handles``.

    Inside a workflow body, the first replay that reaches ``gather`` dispatches
    every spawned step in one transaction; they run in parallel and the run
    resumes once all have ended. If any failed for good, :class:`StepFailed`
    of the first failed one (in ``handles`` order) is raised, after all ended.
    """
    members = list(handles)
    ctx = CURRENT.get()
    if ctx is None:
        values = [h.value for h in members]
        if any(inspect.iscoroutine(v) for v in values):
            raise InvalidArgument("handles", "async steps outside a workflow need gather_async")
        return values
    return ctx.gather(members)


@overload
async def gather_async(
    handles: Iterable[StepHandle[Coroutine[Any, Any, T]]],
) -> list[T]: ...


@overload
async def gather_async(handles: Iterable[StepHandle[T]]) -> list[T]: ...


async def gather_async(handles: Iterable[StepHandle[Any]]) -> list[Any]:
    """:func:`gather` for async workflow bodies (``await gather_async(handles)``); the
    handles of async steps give their awaited results."""
    members = list(handles)
    if CURRENT.get() is None:
        return [await h.value if inspect.iscoroutine(h.value) else h.value for h in members]
    return gather(members)


def continue_as_new(*args: Any, **kwargs: Any) -> NoReturn:
    """End the run here and start its successor: the same workflow, with these
    arguments and a fresh history (inside a workflow body only; never returns).

    The run's end (status ``completed``, its ``RunInfo.continued_as`` naming the
    successor) and the successor's start are one transaction; the successor
    keeps the run's queue, deadline, parent and trace, and names the run in its
    ``RunInfo.continued_from``, and starts with the search attributes the run
    holds at the call (its start's and those ``set_attributes`` changed since).
    ``RunHandle.result()`` of any run of the chain
    follows it to the last run's result. A loop that runs forever keeps a
    bounded history by continuing as new every so many iterations. The body's
    ``finally`` blocks run; nothing after the call does. Not in a ``@saga``
    (its steps could no longer be compensated): the saga fails.
    """
    ctx = CURRENT.get()
    if ctx is None:
        raise UsageError("continue_as_new() is called inside a workflow body only")
    park(ContinueAsNew(args, dict(kwargs), dict(ctx.attributes.values)))
    raise AssertionError("a body that continued as new is never resumed")  # pragma: no cover


async def continue_as_new_async(*args: Any, **kwargs: Any) -> NoReturn:
    """:func:`continue_as_new` for async workflow bodies."""
    continue_as_new(*args, **kwargs)


# Deprecated aliases (async twins are named ``<name>_async``); removed in the next
# minor version.


@deprecated("asleep is deprecated: use sleep_async")
async def asleep(seconds: float) -> None:
    """Deprecated alias of :func:`sleep_async`."""
    await sleep_async(seconds)


@deprecated("asleep_until is deprecated: use sleep_until_async")
async def asleep_until(until: datetime) -> None:
    """Deprecated alias of :func:`sleep_until_async`."""
    await sleep_until_async(until)


@deprecated("agather is deprecated: use gather_async")
async def agather(handles: Iterable[StepHandle[Any]]) -> list[Any]:
    """Deprecated alias of :func:`gather_async`."""
    return await gather_async(handles)
