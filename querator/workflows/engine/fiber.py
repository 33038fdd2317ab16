"""Live workflow bodies: each one runs in a greenlet of the worker's event-loop thread.

A body parks (:func:`park`) where it waits for the engine (a step's outcome, a
timer, a child run) and costs no thread while parked: a greenlet is a stack
slice kept on the heap. The engine resumes it with :meth:`Fiber.resume` from a
task of the event loop, so the body runs on that loop's thread, in its own
``contextvars`` context, and parks again or ends.

An ``async def`` body runs here too: the greenlet steps its coroutine, so a
plain (sync) step call inside it can park like anywhere else, and whatever
else it awaits is relayed to the event loop by the task that resumed it.

:meth:`Fiber.close` tears a parked body down by raising :class:`Evicted` where
it parked, in its own greenlet and context, so its ``finally`` blocks run
there and then, never in another run's context or at garbage collection.
``Evicted`` derives from ``BaseException``: ``except Exception`` in a body
cannot swallow it.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import Any

from greenlet import getcurrent, greenlet

__all__ = ["Evicted", "Fiber", "Finished", "park"]

log = logging.getLogger("querator.workflows")

CLOSE_TRIES = 8
"""Times :meth:`Fiber.close` raises :class:`Evicted` into a body that keeps swallowing it."""


class Evicted(BaseException):
    """Raised where a live body parked, to tear it down (never catch it)."""


@dataclass(frozen=True, slots=True)
class Finished:
    """A body ended: it returned ``value`` or raised ``error``."""

    value: Any = None
    error: Exception | None = None


@dataclass(frozen=True, slots=True)
class _Relay:
    """Something an async body awaits that is not the engine's: for the event loop."""

    value: Any


class _BodyGreenlet(greenlet):  # type: ignore[misc]
    """The greenlet of one :class:`Fiber` (so :func:`park` can tell it is inside one)."""

    fiber: Fiber


def park(request: object) -> None:
    """Hand ``request`` to the engine and wait until it resumes this body.

    Only valid inside a live body (raises RuntimeError elsewhere). Raises
    :class:`Evicted` when the body is torn down instead of resumed.
    """
    current = getcurrent()
    if not isinstance(current, _BodyGreenlet):
        raise RuntimeError("park() outside a live workflow body")
    reply = current.parent.switch(request)
    if reply is not None:
        raise AssertionError(f"a parked body was resumed with {reply!r}")


def _step_coroutine(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` to its end inside the body's greenlet, relaying its awaits."""
    send: Any = None
    throw: BaseException | None = None
    while True:
        try:
            yielded = coro.send(send) if throw is None else coro.throw(throw)
        except StopIteration as stop:
            return stop.value
        send, throw = None, None
        try:
            send = getcurrent().parent.switch(_Relay(yielded))
        except BaseException as exc:  # relayed from the event loop (a cancellation)
            throw = exc


class Fiber:
    """One live body: ``target()`` (a sync function, or one returning a coroutine)."""

    __slots__ = ("_glet", "started")

    def __init__(self, target: Callable[[], Any], context: contextvars.Context) -> None:
        glet = _BodyGreenlet(self._main(target))
        glet.gr_context = context
        glet.fiber = self
        self._glet = glet
        self.started = False

    @staticmethod
    def _main(target: Callable[[], Any]) -> Callable[[], Finished]:
        def main(*_: object) -> Finished:
            try:
                value = target()
                if isinstance(value, Coroutine):
                    value = _step_coroutine(value)
            except Exception as exc:
                return Finished(error=exc)
            return Finished(value=value)

        return main

    @property
    def dead(self) -> bool:
        """True once the body ended or was torn down."""
        return bool(self._glet.dead)

    async def resume(self) -> object:
        """Run the body until it parks (its request) or ends (:class:`Finished`)."""
        self.started = True
        return await _Resume(self._glet, None)

    async def close(self) -> None:
        """Tear the body down where it parked (its ``finally`` blocks run now)."""
        if not self.started or self._glet.dead:
            return
        for _ in range(CLOSE_TRIES):
            try:
                await _Resume(self._glet, Evicted())
            except Evicted:
                return
            if self._glet.dead:
                return
        log.error("a workflow body swallowed its teardown %d times; abandoned", CLOSE_TRIES)
        _ABANDONED.append(self._glet)


_ABANDONED: list[greenlet] = []
"""Bodies that would not end: kept referenced, so the garbage collector never
tears them down in some other context."""


class _Resume:
    """Awaitable: switch into a body and relay its awaits until it parks or ends."""

    __slots__ = ("_glet", "_throw")

    def __init__(self, glet: greenlet, throw: BaseException | None) -> None:
        self._glet = glet
        self._throw = throw

    def __await__(self) -> Generator[Any, Any, object]:
        glet = self._glet
        glet.parent = getcurrent()
        message = glet.switch(None) if self._throw is None else glet.throw(self._throw)
        while isinstance(message, _Relay):
            try:
                sent = yield message.value
            except BaseException as exc:
                message = glet.throw(exc)
            else:
                message = glet.switch(sent)
        return message
