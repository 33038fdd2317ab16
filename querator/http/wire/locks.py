"""Bodies of ``/v1/locks.*``: hold a lock or a semaphore's permit over HTTP
(a shell script with curl acquires, renews while it works, and releases)."""

from __future__ import annotations

from pydantic import Field, field_validator

from querator.http.wire.types import Duration, Instant, WireModel
from querator.locks.listing import SemaphoreInfo
from querator.locks.names import DEFAULT_LEASE
from querator.queue.models import Leased


class CreateRequest(WireModel):
    """``/v1/locks.create``: create semaphore ``name``, or bring it to ``limit``
    and ``lease`` (idempotent; a lowered limit removes permits as their
    holders release them)."""

    name: str
    """The semaphore (or lock) name."""
    limit: int = 1
    """How many holders it admits at once (1: a lock)."""
    lease: Duration = DEFAULT_LEASE
    """How long a permit's lease lasts between renewals."""


class AcquireRequest(WireModel):
    """``/v1/locks.acquire``: take a permit of semaphore ``name``."""

    name: str
    """The semaphore (or lock) name."""
    client_id: str
    """Who holds the permit, as listings show it."""
    limit: int | None = None
    """Create the semaphore with this many permits, or bring it to this limit;
    absent: use it as it is (a missing one is created as a lock, limit 1)."""
    lease: Duration = DEFAULT_LEASE
    """How long the lease lasts between renewals (applies with ``limit``, or
    when the semaphore is created)."""
    request_timeout: Duration = 0.0
    """How long to wait for a free permit (at most 15m; 0: do not wait)."""

    @field_validator("request_timeout")
    @classmethod
    def _bounded(cls, value: float) -> float:
        if not 0 <= value <= 900:
            raise ValueError("must be from 0s to 15m")
        return value


class PermitReply(WireModel):
    """A held permit: pass ``id`` and ``version`` to renew and release (renew
    answers the next ``version``); ``token`` is the fencing token."""

    name: str
    permit: int
    """Which permit of the semaphore (0 to limit - 1)."""
    id: str
    """The permit item's id."""
    version: int
    """Its version now: what the next renew or release names."""
    token: int
    """The fencing token: grows with every acquisition of this permit."""
    lease_deadline: Instant
    """When the permit comes back unless renewed first."""
    lease: Duration | None = None
    """How long each renewal extends the lease (the semaphore's lease): renew
    well before ``lease_deadline``, every third of it."""

    @classmethod
    def of(
        cls, name: str, permit: int, leased: Leased, token: int, lease: float | None = None
    ) -> PermitReply:
        """The reply for ``leased`` (a permit item, just leased or renewed)."""
        return cls(
            name=name,
            permit=permit,
            id=leased.id,
            version=leased.version,
            token=token,
            lease_deadline=leased.lease_deadline,
            lease=lease,
        )


class HeldRequest(WireModel):
    """``/v1/locks.renew`` and ``/v1/locks.release``: a permit held now."""

    name: str
    id: str
    version: int
    """The version the last acquire or renew answered."""
    permit: int = 0
    """Which permit (as acquire answered): a permit past a lowered limit is
    removed on release instead of given back."""
    token: int | None = None
    """The fencing token (only named in the error when the permit was lost)."""


class SemaphoresReply(WireModel):
    """``/v1/locks.list``: every semaphore with its holders."""

    semaphores: list[SemaphoreInfo] = Field(default_factory=list)
