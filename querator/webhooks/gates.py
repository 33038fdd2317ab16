"""Per-endpoint accounting inside one delivery worker (pure code, monotonic clock).

A delivery whose endpoint has no room now waits in the worker only if room
is expected within ``LOCAL_WAIT`` seconds and few others wait (at most
``WAITERS_PER_SLOT`` per in-flight slot); otherwise it is not held: the
worker gives it back to the queue with a ``retry_at`` (a deferral) and moves
on. So a slow or dead endpoint occupies at most ``max_in_flight`` slots of
the worker plus a few brief waiters, while a fast endpoint's backlog is fed
from memory without a write per item.
The deferral is sized so that one item comes back about when room is
expected, not sooner: after the endpoint's observed latency (or the age of
its oldest attempt in flight, for one that hangs), spread by the number of
items already deferred; after the next rate-limit slot; after a
``Retry-After`` the endpoint gave.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from querator.webhooks.endpoints import Endpoint

__all__ = ["Gate", "Gates"]

LOCAL_WAIT = 1.0
"""Longest time an item waits in the worker for room at its endpoint."""
WAITERS_PER_SLOT = 4
MIN_DEFER = 0.05
MAX_DEFER = 300.0
EMA = 0.2
"""Weight of the newest latency in the running average."""


@dataclass
class Gate:
    """One endpoint's state in this worker."""

    in_flight: dict[int, float] = field(default_factory=dict)
    """Attempt token -> when it started."""
    latency: float = 0.0
    """Running average of attempt latency, seconds."""
    tat: float = 0.0
    """Rate limit: the theoretical arrival time of the next delivery (GCRA)."""
    blocked_until: float = 0.0
    """No attempt before this (a Retry-After)."""
    deferred: list[float] = field(default_factory=list)
    """When the items deferred by this worker come back."""
    waiting: int = 0
    """Items waiting in the worker for room (briefly: see ``LOCAL_WAIT``)."""
    busy_keys: dict[str, float] = field(default_factory=dict)
    """Ordered endpoints: ordering key -> no other attempt of it before this
    (an attempt in flight: infinity; a failed one: its retry)."""

    def may_wait(self, endpoint: Endpoint, wait: float, waited: float) -> bool:
        """Whether an item refused for ``wait`` s, after ``waited`` s waiting
        already, may wait in the worker instead of being deferred."""
        room = self.waiting < endpoint.max_in_flight * WAITERS_PER_SLOT
        return room and waited + wait <= LOCAL_WAIT

    def _pending(self, now: float) -> int:
        self.deferred = [due for due in self.deferred if due > now]
        return len(self.deferred)

    def _expected(self, now: float) -> float:
        oldest = min(self.in_flight.values(), default=now)
        return max(self.latency, now - oldest, MIN_DEFER)

    def admit(self, endpoint: Endpoint, now: float, key: str | None, token: int) -> float | None:
        """None: start the attempt now (it is counted in flight under ``token``);
        else the seconds to defer the item by."""
        pending = self._pending(now)
        wait = 0.0
        if self.blocked_until > now:
            wait = self.blocked_until - now
        if len(self.in_flight) >= endpoint.max_in_flight:
            wait = max(wait, self._expected(now) * (1 + pending / endpoint.max_in_flight))
        interval = 1.0 / endpoint.rate_limit if endpoint.rate_limit else 0.0
        tolerance = max(0.0, 1.0 - interval)
        if interval and self.tat - tolerance > now:
            wait = max(wait, self.tat - tolerance - now + pending * interval)
        if key is not None and self.busy_keys.get(key, 0.0) > now:
            until = self.busy_keys[key]
            wait = max(wait, self._expected(now) if until == float("inf") else until - now)
        if wait > 0:
            return min(max(wait, MIN_DEFER), MAX_DEFER)
        self.tat = max(self.tat, now) + interval
        self.in_flight[token] = now
        if key is not None:
            self.busy_keys[key] = float("inf")
        return None

    def deferring(self, due: float) -> None:
        """An item is being deferred until ``due`` (later deferrals queue behind it)."""
        self.deferred.append(due)

    def done(self, token: int, now: float, key: str | None, hold: float = 0.0) -> None:
        """The attempt ``token`` ended at ``now``; an ordering key stays held
        ``hold`` more seconds (until its retry), else it is free."""
        started = self.in_flight.pop(token, None)
        if started is not None:
            latency = now - started
            self.latency = latency if not self.latency else (1 - EMA) * self.latency + EMA * latency
        if key is not None:
            if hold > 0:
                self.busy_keys[key] = now + hold
            else:
                self.busy_keys.pop(key, None)

    def block(self, until: float) -> None:
        """No attempt before ``until`` (the endpoint asked for a pause)."""
        self.blocked_until = max(self.blocked_until, until)


class Gates:
    """Every endpoint's gate in one worker."""

    def __init__(self) -> None:
        self._gates: dict[str, Gate] = {}

    def __getitem__(self, endpoint_id: str) -> Gate:
        gate = self._gates.get(endpoint_id)
        if gate is None:
            gate = self._gates[endpoint_id] = Gate()
        return gate

    def in_flight(self) -> int:
        """Attempts in flight to all endpoints."""
        return sum(len(gate.in_flight) for gate in self._gates.values())
