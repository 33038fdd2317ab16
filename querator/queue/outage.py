"""Riding through a store outage: capped backoff with jitter, and one log line
when the store is lost and one when it is back, not one per failed attempt.

Loops that wait on the store (a worker's lease, ``RunHandle.result``, the
maintenance task, the wakeup listener) and commits that may be repeated safely
(fenced by an item's version) catch :class:`querator.errors.Unavailable`,
tell their :class:`Outage`, sleep :meth:`Backoff.next` and try again.
"""

from __future__ import annotations

import logging
import random
import time

__all__ = ["BACKOFF_CAP", "Backoff", "Outage"]

BACKOFF_CAP = 2.0
"""The longest wait between two attempts (seconds): once the store is back,
a waiting loop notices within this long, however long the outage was."""


class Backoff:
    """Exponential delays from ``initial`` to ``cap`` seconds, each jittered
    down by up to half (so many clients do not retry in step)."""

    __slots__ = ("_delay", "cap", "factor", "initial")

    def __init__(self, initial: float = 0.05, cap: float = BACKOFF_CAP, factor: float = 2.0):
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self._delay = 0.0

    def next(self) -> float:
        """The next delay (seconds)."""
        self._delay = self.initial if self._delay == 0 else min(self.cap, self._delay * self.factor)
        return self._delay * random.uniform(0.5, 1.0)

    def reset(self) -> None:
        """Start again from ``initial`` (after a success)."""
        self._delay = 0.0


class Outage:
    """Logs, for one subsystem (``what``), when the store became unavailable and
    when it answered again, once each per outage."""

    __slots__ = ("_log", "_since", "what")

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self._log = logger
        self.what = what
        self._since: float | None = None

    @property
    def down(self) -> bool:
        """True between :meth:`lost` and :meth:`back`."""
        return self._since is not None

    def lost(self, error: BaseException) -> None:
        """An attempt failed with Unavailable: say so the first time."""
        if self._since is None:
            self._since = time.monotonic()
            self._log.warning("%s: store unavailable (%s); retrying", self.what, error)

    def back(self) -> None:
        """An attempt succeeded: say so if the store was unavailable."""
        if self._since is not None:
            took = time.monotonic() - self._since
            self._since = None
            self._log.warning("%s: store reachable again after %.1fs", self.what, took)
