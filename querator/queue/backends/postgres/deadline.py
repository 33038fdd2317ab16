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

Either way the call raises :class:`~querator.errors.Unavailable`. The first
call of an episode that fails so is logged at WARNING; the episode ends (logged
once too) with the first call that completes once no call has failed so for a
whole deadline.
"""

from __future__ import annotations

import logging
import time

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
