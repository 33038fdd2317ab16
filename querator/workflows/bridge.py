"""Running the workflow layer's async code from the sync :class:`Querator`.

The sync client runs :class:`AsyncQuerator` on a private event-loop thread;
this is the one place that submits our coroutines to that loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from querator.queue.client import Querator

T = TypeVar("T")


def call_sync(q: Querator, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """Run ``fn(*args, **kwargs)`` on ``q``'s event loop and return its result.

    Raises :class:`~querator.errors.UsageError` inside a running event loop or
    on a closed client, like every sync call.
    """
    # Querator has no public "run this coroutine function on your loop" yet;
    # its private _call does exactly that, with the usage checks.
    return q._call(fn, *args, **kwargs)
