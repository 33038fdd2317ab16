"""Bodies of ``/v1/limits.acquire``: count a start against a rate limit over
HTTP (the library's :class:`~querator.limits.RateLimiter`)."""

from __future__ import annotations

from pydantic import field_validator

from querator.http.wire.types import Duration, Instant, WireModel
from querator.limits.rate import DEFAULT_KEY, RateDecision


class CreateRateRequest(WireModel):
    """``/v1/limits.create``: create rate limit ``name`` (idempotent; one that
    exists with another ``n`` or ``per`` is refused, 400)."""

    name: str
    """The limit's name: every client that names it shares it."""
    n: int
    """Starts admitted per period and key."""
    per: Duration = 1.0
    """The period."""


class RateRequest(WireModel):
    """``/v1/limits.acquire``: a start of ``key`` under rate limit ``name``."""

    name: str
    """The limit's name: every client that names it shares it."""
    n: int
    """Starts admitted per period and key (a limit that exists with another
    ``n`` or ``per`` is refused, 400)."""
    per: Duration = 1.0
    """The period."""
    key: str = DEFAULT_KEY
    """The key the start counts against (each key has ``n`` starts per period)."""
    client_id: str | None = None
    """Who starts, as the slots' leases record (absent: the server's host and pid)."""
    request_timeout: Duration = 0.0
    """How long to wait for a start to be admitted (at most 15m; 0: a try,
    answered at once with ``allowed`` false and ``retry_after`` when none is)."""

    @field_validator("request_timeout")
    @classmethod
    def _bounded(cls, value: float) -> float:
        if not 0 <= value <= 900:
            raise ValueError("must be from 0s to 15m")
        return value


class RateReply(WireModel):
    """Whether the start was admitted (and counted), and if not, when one may be."""

    allowed: bool
    retry_after: Duration = 0.0
    """Until a start of this key may be admitted (0s when ``allowed``)."""
    at: Instant | None = None
    """When the start was admitted, by the store's clock (absent when not allowed)."""

    @classmethod
    def of(cls, decision: RateDecision) -> RateReply:
        """The reply for the library's decision."""
        return cls(allowed=decision.allowed, retry_after=decision.retry_after, at=decision.at)

    def decision(self) -> RateDecision:
        """The library's decision of this reply."""
        return RateDecision(allowed=self.allowed, retry_after=self.retry_after, at=self.at)
