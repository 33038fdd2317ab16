"""Long-poll wakeups: one event per queue, replaced each time it fires.

A waiter takes the queue's current event *before* it looks for items, so a
wakeup that arrives between the look and the wait is never lost.
"""

from __future__ import annotations

import anyio


class WakeBoard:
    """Per-queue wakeup events shared by every waiter of one client."""

    def __init__(self) -> None:
        self._events: dict[str, anyio.Event] = {}

    def ticket(self, queue: str) -> anyio.Event:
        """The event the next wakeup of ``queue`` will set."""
        event = self._events.get(queue)
        if event is None:
            event = self._events[queue] = anyio.Event()
        return event

    def wake(self, queue: str) -> None:
        """Wake every waiter of ``queue`` (call from the client's event loop)."""
        event = self._events.pop(queue, None)
        if event is not None:
            event.set()

    def wake_all(self) -> None:
        """Wake every waiter of every queue (after a reconnect, say)."""
        events, self._events = self._events, {}
        for event in events.values():
            event.set()


async def wait_for_wake(ticket: anyio.Event, seconds: float) -> bool:
    """Wait up to ``seconds`` for ``ticket``; True if it fired."""
    with anyio.move_on_after(seconds):
        await ticket.wait()
        return True
    return False
