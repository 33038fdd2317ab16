"""A held permit: what ``with sem.acquire() as permit`` gives."""

from __future__ import annotations

import time
from datetime import datetime

from querator.locks.names import index_of, token_of
from querator.locks.store import holder_of
from querator.queue.models import Leased


class Permit:
    """One permit of a semaphore, held by this process until released.

    Its lease is renewed in the background while held. ``token`` is its fencing
    token: pass it to the resource the lock guards, which refuses a token lower
    than the highest it has seen; it grows with every acquisition of this
    permit. ``lost`` turns true when a renewal did not reach the store before
    the lease ran out: another holder may have the permit, and releasing it
    raises :class:`~querator.errors.LockLost`.
    """

    __slots__ = ("_current", "_deadline", "_due", "_lease", "_lost", "_released", "name", "token")

    def __init__(self, name: str, leased: Leased, lease: float, started: float) -> None:
        self.name = name
        """The semaphore's name."""
        self.token = token_of(leased.payload, leased.version)
        """The fencing token: the permit item's version when it was leased (plus
        the tokens of the items it replaced, after a year of use)."""
        self._current = leased
        self._lease = lease
        self._lost = False
        self._released = False
        self._deadline = started + lease
        self._due = started + lease / 3
        """When the next renewal is due (``time.monotonic()``)."""

    @property
    def index(self) -> int:
        """Which of the semaphore's permits this is (0 to limit - 1)."""
        return index_of(self._current.dedup_key)

    @property
    def client_id(self) -> str:
        """The holder's client id."""
        return holder_of(self._current.client_id)[0]

    @property
    def acquired_at(self) -> datetime | None:
        """When the permit was taken (the holder's clock)."""
        return holder_of(self._current.client_id)[1]

    @property
    def lost(self) -> bool:
        """True when the lease may have lapsed: a renewal was refused, or none
        reached the store before the lease's deadline (measured from before the
        last successful call, so this errs towards lost)."""
        return self._lost or (not self._released and time.monotonic() >= self._deadline)

    def __repr__(self) -> str:
        state = "lost" if self.lost else "released" if self._released else "held"
        return f"<Permit {self.name!r} #{self.index} token={self.token} {state}>"
