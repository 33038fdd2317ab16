"""How webhooks are sent and delivered: one frozen settings model, defaults here."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from querator.model_bases import InputModel
from querator.queue.validation import MAX_DURATION

__all__ = ["DEFAULT_SCHEDULE", "WebhookSettings"]

DEFAULT_SCHEDULE: tuple[float, ...] = (0.0, 5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 36000.0)
"""Delays before each attempt, Svix-like: at once, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h."""
MAX_DELAY = 7 * 86_400.0
"""The longest delay a schedule (or a Retry-After) may ask for."""

Delay = Annotated[float, Field(ge=0, le=MAX_DELAY)]
Positive = Annotated[float, Field(gt=0, le=MAX_DURATION)]


class WebhookSettings(InputModel):
    """Delivery and sending options; pass one to ``Webhooks`` and ``DeliveryWorker``."""

    schedule: tuple[Delay, ...] = DEFAULT_SCHEDULE
    """Delay in seconds before each attempt; its length is the number of attempts.
    The first entry is the delay of the first attempt (normally 0)."""
    jitter: float = Field(default=0.2, ge=0, le=1)
    """Each retry delay is multiplied by a random factor in ``[1 - jitter, 1 + jitter]``."""
    connect_timeout: Positive = 5.0
    """Seconds to open a connection to an endpoint."""
    timeout: Positive = 15.0
    """Seconds one attempt may take in all (connect, send, read the answer)."""
    max_payload_bytes: int = Field(default=256 * 1024, ge=1, le=16 * 1024 * 1024)
    """Largest encoded JSON payload ``send`` accepts."""
    allow_private: bool = False
    """Allow targets on loopback and private addresses (development and tests
    only); cloud metadata addresses (all of ``169.254.0.0/16`` included) stay
    refused."""
    disable_after: Positive | None = 5 * 86_400.0
    """An endpoint whose deliveries have failed without one success for this long
    is disabled, with the reason recorded; None never disables."""
    retention: Positive = 30 * 86_400.0
    """Seconds messages and attempt records are kept."""
    response_excerpt: int = Field(default=1024, ge=0, le=65_536)
    """Bytes of each response body kept in the attempts log."""
    lease_timeout: float = Field(default=10.0, ge=1.0, le=600.0)
    """Seconds a delivery's lease lasts (renewed every third of it while its
    attempt runs): a killed worker's deliveries are attempted again after at
    most this long. Applied when the deliveries queue is created; workers
    read it from the queue."""
    ca_file: str | None = None
    """A PEM file of the certificate authorities HTTPS endpoints are checked
    against; None: the ``certifi`` bundle (the public web's)."""
    max_retry_after: Delay = 86_400.0
    """The longest ``Retry-After`` honoured (longer answers are capped to it)."""

    @field_validator("schedule")
    @classmethod
    def _some_attempts(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if not 1 <= len(value) <= 100:
            raise ValueError("must hold 1 to 100 delays")
        return value
