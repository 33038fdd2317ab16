"""The sync shell of a service: ``Worker.run()`` and its kin.

:func:`run_sync` runs a service's ``arun`` on a sync client's event loop
until it returns. Called in the main thread, it installs SIGTERM and SIGINT
handlers for that time (the previous ones are restored after): the first
signal asks the service to stop gracefully, the second to hurry. The main
thread waits with :meth:`~querator.queue.client.QueueClient.serve`, which
wakes every 0.1 s: a handler runs promptly even when the kernel delivered
the signal to another thread.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Awaitable, Callable
from types import FrameType

from querator.queue.client import QueueClient

__all__ = ["run_sync"]

HURRY_HINT = " (again: release items in hand)"


def run_sync(
    q: QueueClient,
    arun: Callable[[], Awaitable[None]],
    stop: Callable[[], None],
    log: logging.Logger,
    name: str,
    *,
    hurry: bool = True,
) -> None:
    """Run ``arun`` on ``q``'s loop until it returns; in the main thread,
    SIGTERM/SIGINT call ``stop`` (see the module doc). ``name`` starts the
    log lines; ``hurry``: a second signal releases the items in hand (said
    in the log)."""
    if threading.current_thread() is not threading.main_thread():
        q.serve(arun)
        return
    received = 0

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal received
        received += 1
        sig = signal.Signals(signum).name
        if received == 1:
            log.info("%s: %s, stopping%s", name, sig, HURRY_HINT if hurry else "")
        elif received == 2 and hurry:
            log.warning("%s: %s again, releasing the items in hand", name, sig)
        # stop() waits for the loop: never in a handler, which may interrupt it
        threading.Thread(target=stop, daemon=True).start()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        q.serve(arun)
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
