"""Per-endpoint accounting inside one delivery worker (pure code, monotonic clock).

A delivery whose endpoint has no room now (its ``max_in_flight`` attempts
are running, its rate limit is reached, it asked for a pause, or an earlier
message of the same ordering key is pending) starts waiting in the worker
only if room is expected within ``LOCAL_WAIT`` seconds, counting the items
already waiting ahead of it, and goes on waiting while the endpoint makes
progress (an attempt ended within the last ``LOCAL_WAIT`` seconds).
Otherwise it is not held: the worker gives it back to the queue with a
``retry_at`` (a deferral) and moves on. So a fast endpoint's
backlog is fed from memory (no write per item), while a slow or hanging
endpoint holds its ``max_in_flight`` slots and a handful of short waits,
never the worker.

The expected wait comes from the endpoint's observed latency (a running
average), or the age of its oldest attempt in flight when that is longer (an
endpoint that hangs), or ``UNKNOWN_LATENCY`` before any attempt has ended.
A deferral lasts about as long as the wait it avoids, plus one slot (the
endpoint's average latency — or, before any attempt ended, the age of its
oldest attempt in flight — over its ``max_in_flight``, or its rate-limit
interval) per item deferred before it, so deferred items come back spread
out at about the pace the endpoint drains them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from querator.webhooks.endpoints import Endpoint

__all__ = ["Gate", "Gates"]

LOCAL_WAIT = 2.0
"""Longest time an item waits in the worker for room at its endpoint."""
RECHECK = 0.1
"""A waiting item looks again at least this often."""
UNKNOWN_LATENCY = 0.5
"""The latency assumed of an endpoint until one of its attempts has ended."""
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
    """Running average of attempt latency, seconds (0: none ended yet)."""
    tat: float = 0.0
    """Rate limit: the theoretical arrival time of the next delivery (GCRA)."""
    blocked_until: float = 0.0
    """No attempt before this (a Retry-After)."""
    deferred: list[float] = field(default_factory=list)
    """When the items deferred by this worker come back."""
    waiting: int = 0
    """Items waiting in the worker for room."""
    last_done: float = 0.0
    """When an attempt here last ended."""
    busy_keys: dict[str, float] = field(default_factory=dict)
    """Ordered endpoints: ordering key -> no other attempt of it before this
    (an attempt in flight: infinity; a failed one: its retry)."""

    def _pending(self, now: float) -> int:
        self.deferred = [due for due in self.deferred if due > now]
        return len(self.deferred)

    def _expected(self, now: float) -> float:
        oldest = min(self.in_flight.values(), default=now)
        return max(self.latency or UNKNOWN_LATENCY, now - oldest)

    def admit(self, endpoint: Endpoint, now: float, key: str | None, token: int) -> float | None:
        """None: start the attempt now (it is counted in flight under ``token``);
        else the expected wait for room, in seconds, counting the items
        waiting for it in the worker ahead of this one."""
        wait = self.expected_wait(endpoint, now, key)
        if wait > 0:
            return min(wait, MAX_DEFER)
        self.tat = max(self.tat, now) + (1.0 / endpoint.rate_limit if endpoint.rate_limit else 0.0)
        self.in_flight[token] = now
        if key is not None:
            self.busy_keys[key] = float("inf")
        return None

    def expected_wait(self, endpoint: Endpoint, now: float, key: str | None) -> float:
        """Seconds until an item of ``key`` can start here, counting the items
        waiting in the worker ahead of it (0: now)."""
        ahead = self.waiting
        wait = max(self.blocked_until - now, 0.0)
        if len(self.in_flight) >= endpoint.max_in_flight:
            wait = max(wait, self._expected(now) * (1 + ahead / endpoint.max_in_flight))
        interval = 1.0 / endpoint.rate_limit if endpoint.rate_limit else 0.0
        tolerance = max(0.0, 1.0 - interval)
        if interval and self.tat - tolerance > now:
            wait = max(wait, self.tat - tolerance - now + ahead * interval)
        if key is not None and self.busy_keys.get(key, 0.0) > now:
            until = self.busy_keys[key]
            wait = max(wait, self._expected(now) if until == float("inf") else until - now)
        return wait

    def may_wait(self, wait: float, now: float, began: float, first: bool) -> bool:
        """Whether an item refused for an expected ``wait`` s may wait in the
        worker instead of being deferred: to start waiting, the wait (which
        counts the items waiting ahead) must be under ``LOCAL_WAIT``, so an
        endpoint's waiters are about that much of its draining; to go on
        (waiting since ``began``), the endpoint must be making progress and
        the wait stay short."""
        if first:
            return wait <= LOCAL_WAIT
        return wait <= 2 * LOCAL_WAIT and not self.stalled(now, began)

    def stalled(self, now: float, since: float) -> bool:
        """Whether no attempt here has ended for ``LOCAL_WAIT`` seconds (counted
        from ``since`` at the earliest): its waiters stop waiting."""
        return now - max(self.last_done, since) > LOCAL_WAIT

    def deferring(self, endpoint: Endpoint, now: float, wait: float) -> float:
        """An item is deferred now, ``wait`` s being expected before there is room:
        the seconds to defer it by, spread behind the items deferred before it."""
        rate = endpoint.rate_limit or float("inf")
        # no attempt ended yet: pace by the age of the oldest in flight (an endpoint
        # that hangs is spread far), or assume a fast one (nothing in flight yet)
        oldest = min(self.in_flight.values(), default=now)
        pace = self.latency or max(now - oldest, MIN_DEFER)
        slot = max(pace / endpoint.max_in_flight, 1.0 / rate)
        delay = min(max(wait, MIN_DEFER) + self._pending(now) * slot, MAX_DEFER)
        self.deferred.append(now + delay)
        return delay

    def done(self, token: int, now: float, key: str | None, hold: float = 0.0) -> None:
        """The attempt ``token`` ended at ``now``; an ordering key stays held
        ``hold`` more seconds (until its retry), else it is free."""
        started = self.in_flight.pop(token, None)
        self.last_done = now
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
