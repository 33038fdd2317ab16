"""The clock a client reads: the store's own by default, or one a test steps.

Every instant querator decides with (an item is due, a lease has expired, a
durable sleep is over, a cron tick has come, a run's deadline has passed) comes
from the client's clock. The default :class:`SystemClock` leaves time to the
store (PostgreSQL's ``now()``, the host clock for SQLite and memory) and to the
host clock in Python. A :class:`ManualClock` is given to every statement as the
instant to use instead (SQL coalesces it with the database clock, as River
does), so a test moves time forward by a day without sleeping:

```python
clock = ManualClock()
with Querator("memory://", clock=clock) as q:
    q.create_queue("later", QueueSettings())
    q.produce("later", [Item(payload=b"x", enqueue_at=clock.now() + timedelta(hours=1))])
    clock.advance(hours=1)  # due now: no sleeping
    [item] = q.lease("later", client_id="test", timeout=5)
```

See docs/testing.md for workflows, timers and schedules on a manual clock.

Advancing wakes every waiting consumer of every client that uses the clock.
Only durations of calls (a lease's ``timeout``, a worker's poll) stay in real
time.
"""

from __future__ import annotations

import threading
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta
from typing import Any

from typing_extensions import deprecated

from querator.errors import InvalidArgument

__all__ = ["Clock", "ManualClock", "SystemClock", "stamp", "using"]


class Clock(ABC):
    """What a clock offers querator; :class:`SystemClock` and :class:`ManualClock` are the two."""

    @abstractmethod
    def now(self) -> datetime:
        """The current instant (timezone-aware UTC)."""

    @abstractmethod
    def store_now(self) -> datetime | None:
        """The instant the store's statements use instead of their own clock
        (``None``: the store's clock)."""

    @deprecated("Clock.given() is deprecated: use Clock.store_now()")
    def given(self) -> datetime | None:
        """Deprecated alias of :meth:`store_now` (removed in the next minor version)."""
        return self.store_now()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass written for the old name (it defines ``given`` only) keeps
        working: its ``given`` serves as ``store_now``, with a warning."""
        super().__init_subclass__(**kwargs)
        if "given" in vars(cls) and "store_now" not in vars(cls):
            warnings.warn(
                f"{cls.__name__}.given() is deprecated: name it store_now()",
                DeprecationWarning,
                stacklevel=2,
            )
            cls.store_now = vars(cls)["given"]  # type: ignore[method-assign]

    @abstractmethod
    def on_advance(self, wake: Callable[[], None]) -> Callable[[], None]:
        """Call ``wake`` (from the advancing thread) whenever time jumps; returns an unsubscribe."""


class SystemClock(Clock):
    """Real time: the store's clock in statements, the host's in Python (the default)."""

    def now(self) -> datetime:
        """The host's current instant."""
        return datetime.now(UTC)

    def store_now(self) -> None:
        """Always ``None``: statements read the store's own clock."""
        return None

    def on_advance(self, wake: Callable[[], None]) -> Callable[[], None]:
        """Real time never jumps: nothing to subscribe to."""
        return _nothing


def _nothing() -> None:
    return None


SYSTEM = SystemClock()
"""The one system clock every client uses unless given another."""


class ManualClock(Clock):
    """A clock that stands still until :meth:`advance` or :meth:`set` moves it (for tests).

    It starts at ``start`` (default: the real time at creation). Thread-safe;
    one clock may be shared by several clients, which then all see the same
    instant. It never goes backwards.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = _aware("start", start) if start is not None else datetime.now(UTC)
        self._lock = threading.Lock()
        self._wakes: list[Callable[[], None]] = []

    def now(self) -> datetime:
        """The clock's instant."""
        return self._now

    def store_now(self) -> datetime:
        """The clock's instant: statements use it instead of the store's clock."""
        return self._now

    def advance(
        self, seconds: float = 0.0, *, minutes: float = 0.0, hours: float = 0.0, days: float = 0.0
    ) -> datetime:
        """Move forward by the sum of the given amounts; returns the new instant."""
        step = timedelta(seconds=seconds, minutes=minutes, hours=hours, days=days)
        if step < timedelta(0):
            raise InvalidArgument("seconds", "a clock never goes backwards: give a positive step")
        return self.set(self._now + step)

    def set(self, when: datetime) -> datetime:
        """Move to ``when`` (not earlier than now); returns it."""
        when = _aware("when", when)
        with self._lock:
            if when < self._now:
                raise InvalidArgument(
                    "when", f"{when.isoformat()} is before the clock's {self._now.isoformat()}"
                )
            self._now = when
            wakes = list(self._wakes)
        for wake in wakes:
            wake()
        return when

    def on_advance(self, wake: Callable[[], None]) -> Callable[[], None]:
        """Call ``wake`` after every move; returns the function that stops it."""
        with self._lock:
            self._wakes.append(wake)

        def unsubscribe() -> None:
            with self._lock:
                if wake in self._wakes:
                    self._wakes.remove(wake)

        return unsubscribe


_CURRENT: ContextVar[Clock] = ContextVar("querator_clock", default=SYSTEM)


def stamp() -> datetime:
    """Now on the clock of the worker or call in progress: what records are stamped
    with (``finished_at``, ``requested_at`` …) when no instant is given."""
    return _CURRENT.get().now()


@contextmanager
def using(clock: Clock) -> Iterator[None]:
    """Stamp records made in this context (and the tasks and threads it starts)
    with ``clock``: a worker, a scheduler and the run APIs enter their client's."""
    token = _CURRENT.set(clock)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def _aware(name: str, value: datetime) -> datetime:
    if not isinstance(value, datetime):
        raise InvalidArgument(name, f"must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None:
        raise InvalidArgument(name, "must be timezone-aware (e.g. datetime.now(UTC))")
    return value.astimezone(UTC)
