"""The statement deadline: no call waits on PostgreSQL for longer than it.

Every call's statements run on a pooled connection under one deadline
(``?statement_deadline=``, :class:`~.dsn.ConnectTarget`). Two things enforce it:

- PostgreSQL's ``lock_timeout``, set on every pooled session to the deadline:
  a statement queued behind a lock held elsewhere gives up in the server,
  which stays consistent (the connection is kept);
- a client-side cut-off :data:`MARGIN` seconds later, for whatever the server
  does not end itself (a commit waiting for a synchronous standby that is
  gone, a server that stopped answering): the call is interrupted, its
  connection discarded, and its outcome is unknown.

The cut-offs of all calls in flight share one timer (:class:`Cutoffs`), so a
call costs two dictionary operations rather than a timer of its own.

Either way the call raises :class:`~querator.errors.Unavailable`. The first
call of an episode that fails so is logged at WARNING; the episode ends (logged
once too) with the first call that completes once no call has failed so for a
whole deadline.
"""

from __future__ import annotations

import asyncio
import logging
import time

import anyio
from psycopg import sql

log = logging.getLogger("querator.postgres")

MARGIN = 1.0
"""Seconds past the deadline before the client cuts a call off itself."""

LOCK_TIMEOUT = sql.SQL("SELECT set_config('lock_timeout', {}, false)")
"""Run on every pooled session with the deadline in milliseconds."""


def lock_timeout(deadline: float) -> sql.Composed:
    """The statement giving a session ``lock_timeout`` = ``deadline``."""
    return LOCK_TIMEOUT.format(sql.Literal(f"{max(1, round(deadline * 1000))}ms"))


class Blocked:
    """Says once per episode that calls are blocked, and once that they are not."""

    __slots__ = ("_last", "_since", "deadline", "store")

    def __init__(self, store: str, deadline: float) -> None:
        self.store = store
        self.deadline = deadline
        self._since: float | None = None
        self._last = 0.0

    @property
    def blocked(self) -> bool:
        """True between a call that passed its deadline and the next call that completed."""
        return self._since is not None

    def passed(self, why: str) -> str:
        """A call passed its deadline (``why``: what it waited on); the one-line reason."""
        reason = f"a statement did not complete within {self.deadline:g}s ({why})"
        self._last = time.monotonic()
        if self._since is None:
            self._since = time.monotonic()
            log.warning(
                "%s: %s; calls fail Unavailable until statements complete again",
                self.store,
                reason,
            )
        return reason

    def completed(self) -> None:
        """A call completed: ends the episode, if one is on and quiet for a deadline."""
        now = time.monotonic()
        if self._since is not None and now - self._last >= self.deadline:
            took = now - self._since
            self._since = None
            log.warning("%s: statements complete again after %.1fs blocked", self.store, took)


class Cutoffs:
    """The client-side cut-off of every call in flight, on one timer.

    A call enters a deadline-less cancel scope and registers it (:meth:`start`)
    with its cut-off instant, ``after`` seconds on; it unregisters it when it
    ends (:meth:`end`). Every call gets the same ``after``, so the registered
    scopes are in cut-off order: one loop timer, set for the oldest call's
    cut-off, cancels the scopes whose instant has passed and re-arms itself for
    the next one. A call that ends in time costs no timer of its own; a busy
    client's timer fires about once per ``after`` seconds.
    """

    __slots__ = ("_after", "_calls", "_loop", "_timer")

    def __init__(self, after: float) -> None:
        self._after = after
        self._calls: dict[anyio.CancelScope, float] = {}
        """Scope -> its cut-off instant (the loop's clock), oldest first."""
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop the timer is on (a backend reopened on another loop re-arms it)."""

    def start(self, scope: anyio.CancelScope) -> None:
        """Cut ``scope`` off unless :meth:`end` comes within ``after`` seconds."""
        loop = asyncio.get_running_loop()
        due = loop.time() + self._after
        self._calls[scope] = due
        if self._timer is None or loop is not self._loop:
            self._loop = loop
            self._timer = loop.call_at(due, self._fire, loop)

    def end(self, scope: anyio.CancelScope) -> None:
        """``scope``'s call ended (or was cut off): forget it."""
        self._calls.pop(scope, None)

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        if loop is not self._loop:
            return  # a timer of a loop this client left
        self._timer = None
        now = loop.time()
        while self._calls:
            scope, due = next(iter(self._calls.items()))
            if due > now:
                self._timer = loop.call_at(due, self._fire, loop)
                return
            del self._calls[scope]
            scope.cancel()
