"""Starting an async task's attempt at once, in the task that leased it.

A worker's batch of async task items runs in one task of the event loop, not
one each: each attempt's coroutine is started at once (its first step runs
right there, in a copy of the context, as a new task's would), and most
quick tasks finish in that step: no task, no turn of the event loop, no
scheduling. An attempt that suspends goes on in the task that started it
(:class:`Resume`: its cancel scopes and ``current_task()`` stay with it); the
batch's other items go on in a new task. Python 3.12's eager tasks do the
same for a task of their own.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any

__all__ = ["Resume", "Started", "start"]


class Started:
    """An attempt started at once: ``done`` with its ``outcome`` (the value or
    the exception), or suspended (``await`` :attr:`rest` to go on)."""

    __slots__ = ("done", "outcome", "rest")

    def __init__(self, done: bool, outcome: Any = None, rest: Awaitable[Any] | None = None) -> None:
        self.done = done
        self.outcome = outcome
        """The return value, or the exception raised (when ``done``)."""
        self.rest = rest
        """The rest of the attempt (when not ``done``)."""


def start(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Any) -> Started:
    """Call the async ``fn`` and run it up to its first suspension, in a copy of
    the current context. An ``Exception`` it raises is its outcome; others
    (``KeyboardInterrupt``) propagate."""
    context = contextvars.copy_context()
    try:
        coro = context.run(fn, *args, **kwargs)
        if not isinstance(coro, Coroutine):
            return Started(False, rest=coro)  # an awaitable of another kind: await it
        first = context.run(coro.send, None)
    except StopIteration as stop:
        return Started(True, stop.value)
    except Exception as exc:
        return Started(True, exc)
    return Started(False, rest=Resume(coro, first, context))


class Resume:
    """The rest of a coroutine whose first step ran (it yielded ``first``):
    awaiting it hands ``first`` to the event loop and drives the coroutine on,
    each step in ``context``, as ``await`` would."""

    __slots__ = ("context", "coro", "first")

    def __init__(
        self, coro: Coroutine[Any, Any, Any], first: Any, context: contextvars.Context
    ) -> None:
        self.coro = coro
        self.first = first
        self.context = context

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, run, value = self.coro, self.context.run, self.first
        while True:
            try:
                sent = yield value
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # a cancellation, thrown in as await would
                try:
                    value = run(coro.throw, exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    value = run(coro.send, sent)
                except StopIteration as stop:
                    return stop.value
