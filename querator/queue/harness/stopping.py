"""Stopping a service: once gracefully, twice in a hurry, from any thread."""

from __future__ import annotations

import threading

import anyio
from anyio.lowlevel import EventLoopToken, current_token

__all__ = ["StopRequest"]


class StopRequest:
    """The stop requests of one service run: :meth:`request` is safe from any
    thread (and from signal handlers, through a thread), before or during the
    run; the service awaits :attr:`stopping` (and :attr:`hurry`, set from the
    second request on) on its loop, between :meth:`bind` and :meth:`unbind`."""

    def __init__(self) -> None:
        self.count = 0
        """Requests so far (0: none; 2 or more: hurry)."""
        self._token: EventLoopToken | None = None
        self._loop_thread = 0
        self.stopping: anyio.Event
        """Set by the first request (made by :meth:`bind`)."""
        self.hurry: anyio.Event
        """Set by the second request (made by :meth:`bind`)."""

    @property
    def token(self) -> EventLoopToken | None:
        """The loop of the run (None between runs)."""
        return self._token

    @property
    def requested(self) -> bool:
        """True once :meth:`request` was called."""
        return self.count > 0

    def bind(self) -> None:
        """Start a run on the current event loop (requests made before it count)."""
        self.stopping = anyio.Event()
        self.hurry = anyio.Event()
        self._loop_thread = threading.get_ident()
        self._token = current_token()
        self._signal()

    def unbind(self) -> None:
        """The run ended: later requests are only counted."""
        self._token = None

    def request(self) -> None:
        """Ask the run to stop; again: to hurry."""
        self.count += 1
        token = self._token
        if token is None:
            return  # not running: bind() will see the request
        if threading.get_ident() == self._loop_thread:
            self._signal()
        else:
            anyio.from_thread.run_sync(self._signal, token=token)

    def _signal(self) -> None:
        if self.count > 0:
            self.stopping.set()
        if self.count > 1:
            self.hurry.set()
