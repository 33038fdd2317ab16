"""Long-poll wakeups: one event per queue, replaced each time it fires.

A waiter takes the queue's current event *before* it looks for items, so a
wakeup that arrives between the look and the wait is never lost.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

WakeHook = Callable[[str], None]
"""Called with the name of a wakeup (see :meth:`WakeBoard.hook`)."""


class WakeBoard:
    """Per-queue wakeup events shared by every waiter of one client."""

    def __init__(self) -> None:
        self._events: dict[str, anyio.Event] = {}
        self._hooks: dict[str, WakeHook] = {}
        """Name prefix -> what each wakeup of a name under it calls."""

    def hook(self, prefix: str, call: WakeHook) -> Callable[[], None]:
        """Call ``call(name)`` at each wakeup of a name starting with ``prefix``
        (on the client's event loop: it must neither block nor raise), until the
        function returned is called."""
        self._hooks[prefix] = call

        def unhook() -> None:
            if self._hooks.get(prefix) is call:
                del self._hooks[prefix]

        return unhook

    def ticket(self, queue: str) -> anyio.Event:
        """The event the next wakeup of ``queue`` will set."""
        event = self._events.get(queue)
        if event is None:
            event = self._events[queue] = anyio.Event()
        return event

    def waiting(self, queue: str) -> bool:
        """Whether anything waits on ``queue``'s next wakeup (safe from any thread:
        a waiter takes its ticket before it looks, so a change made before this
        is asked is seen by a waiter it misses)."""
        return queue in self._events

    def wake(self, queue: str) -> None:
        """Wake every waiter of ``queue`` (call from the client's event loop)."""
        event = self._events.pop(queue, None)
        if event is not None:
            event.set()
        if self._hooks:
            for prefix, call in list(self._hooks.items()):
                if queue.startswith(prefix):
                    call(queue)

    def wake_all(self) -> None:
        """Wake every waiter of every queue (after a reconnect, say)."""
        events, self._events = self._events, {}
        for event in events.values():
            event.set()


class Watch:
    """Wakeups of one queue since the watch was taken (see ``AsyncQuerator.watch``)."""

    def __init__(self, board: WakeBoard, queue: str, cap: float) -> None:
        self._board = board
        self._queue = queue
        self._cap = cap
        self._ticket = board.ticket(queue)

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds (at most the client's safety cap) for a
        wakeup since the last wait; True if one came."""
        fired = await wait_for_wake(self._ticket, max(0.0, min(timeout, self._cap)))
        self._ticket = self._board.ticket(self._queue)
        return fired

    def fired(self) -> bool:
        """True if a wakeup came since the last wait (or the watch was taken),
        without waiting."""
        return self._ticket.is_set()


async def wait_for_wake(ticket: anyio.Event, seconds: float) -> bool:
    """Wait up to ``seconds`` for ``ticket``; True if it fired."""
    with anyio.move_on_after(seconds):
        await ticket.wait()
        return True
    return False
