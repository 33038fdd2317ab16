"""A held permit: what ``with sem.acquire() as permit`` gives, and what its
source tells of a permit just taken."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class Taken:
    """A permit just taken, as its source tells it."""

    current: Any
    """What renewing and releasing it name (the source's own record of it)."""
    index: int
    """Which permit of the semaphore (0 to limit - 1)."""
    token: int
    """Its fencing token."""
    lease: float
    """Seconds its lease lasts between renewals."""
    client_id: str
    """Its holder."""
    acquired_at: datetime | None
    """When it was taken (the holder's clock)."""


class Permit:
    """One permit of a semaphore, held by this process until released.

    Its lease is renewed in the background while held. ``token`` is its fencing
    token: pass it to the resource the lock guards, which refuses a token lower
    than the highest it has seen; it grows with every acquisition of this
    permit. ``lost`` turns true when a renewal did not reach the store before
    the lease ran out: another holder may have the permit, and releasing it
    raises :class:`~querator.errors.LockLost`.
    """

    __slots__ = (
        "_current",
        "_deadline",
        "_due",
        "_lease",
        "_lost",
        "_released",
        "acquired_at",
        "client_id",
        "index",
        "name",
        "token",
    )

    def __init__(self, name: str, taken: Taken, started: float) -> None:
        self.name = name
        """The semaphore's name."""
        self.token = taken.token
        """The fencing token: the permit item's version when it was leased (plus
        the tokens of the items it replaced, after a year of use)."""
        self.index = taken.index
        """Which of the semaphore's permits this is (0 to limit - 1)."""
        self.client_id = taken.client_id
        """The holder's client id."""
        self.acquired_at: datetime | None = taken.acquired_at
        """When the permit was taken (the holder's clock)."""
        self._current: Any = taken.current
        self._lease = taken.lease
        self._lost = False
        self._released = False
        self._deadline = started + taken.lease
        self._due = started + taken.lease / 3
        """When the next renewal is due (``time.monotonic()``)."""

    @property
    def lost(self) -> bool:
        """True when the lease may have lapsed: a renewal was refused, or none
        reached the store before the lease's deadline (measured from before the
        last successful call, so this errs towards lost)."""
        return self._lost or (not self._released and time.monotonic() >= self._deadline)

    def __repr__(self) -> str:
        state = "lost" if self.lost else "released" if self._released else "held"
        return f"<Permit {self.name!r} #{self.index} token={self.token} {state}>"
