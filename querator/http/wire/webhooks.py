"""Bodies of the webhook endpoints (``/v1/webhooks/…``, querator's own).

Answers reuse the library's records (``Endpoint``, ``Message``, ``Attempt``,
``FailedDelivery``): the wire shape is the domain shape. Optional request
fields left out are left out of the library call too, so its defaults (and
its checks) are the only ones.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from querator.http.wire.types import Duration, Instant, WireModel
from querator.webhooks.endpoints import Endpoint
from querator.webhooks.inspection import FailedDelivery
from querator.webhooks.layout import Attempt


class EndpointOptionsBody(WireModel):
    """The options of an endpoint (see ``Webhooks.add_endpoint``); each one
    left out keeps the library's default (on add) or its value (on update)."""

    description: str | None = None
    event_types: list[str] | None = None
    """Exact types, ``prefix.*`` or ``*``; null: every type."""
    rate_limit: float | None = None
    """Deliveries per second, per delivery worker; null: no limit."""
    max_in_flight: int | None = None
    """Attempts at once, per delivery worker (default 10)."""
    headers: dict[str, str] | None = None
    """Sent with every delivery."""
    ordered: bool | None = None
    """Deliver the messages of one ``ordering_key`` one at a time."""

    def given(self, *leave_out: str) -> dict[str, Any]:
        """The fields the request set (null included), but ``leave_out``."""
        return {
            name: getattr(self, name) for name in self.model_fields_set if name not in leave_out
        }


class AddEndpointRequest(EndpointOptionsBody):
    """``/v1/webhooks/endpoints.add``: a new endpoint (its secret generated unless given)."""

    url: str
    secret: str | None = None
    """A ``whsec_`` secret (default: generated)."""


class UpdateEndpointRequest(EndpointOptionsBody):
    """``/v1/webhooks/endpoints.update``: change the options given."""

    endpoint_id: str
    url: str | None = None


class EndpointRequest(WireModel):
    """A call naming one endpoint."""

    endpoint_id: str


class DisableEndpointRequest(WireModel):
    """``/v1/webhooks/endpoints.disable``."""

    endpoint_id: str
    reason: str = ""


class RotateSecretRequest(WireModel):
    """``/v1/webhooks/endpoints.rotate_secret``: a new secret (generated unless
    given); the old one keeps signing for ``grace``."""

    endpoint_id: str
    secret: str | None = None
    grace: Duration = Field(default=86_400.0)


class EndpointsReply(WireModel):
    """Every endpoint, by id."""

    endpoints: list[Endpoint]


class SendRequest(WireModel):
    """``/v1/webhooks/messages.send``: one message to every matching endpoint."""

    event_type: str
    payload: Any
    """Any JSON value."""
    idempotency_key: str | None = None
    ordering_key: str | None = None


class MessageRequest(WireModel):
    """``/v1/webhooks/messages.get``."""

    message_id: str


class AttemptsRequest(WireModel):
    """``/v1/webhooks/attempts.list``: every attempt of a message, or the newest
    attempts to an endpoint."""

    message_id: str | None = None
    endpoint_id: str | None = None
    limit: int = 100


class AttemptsReply(WireModel):
    """Attempts (of a message: by endpoint, oldest first; of an endpoint: newest first)."""

    attempts: list[Attempt]


class FailedRequest(WireModel):
    """``/v1/webhooks/failed.list``: failed deliveries waiting to be re-driven."""

    endpoint_id: str | None = None
    since: Instant | None = None
    limit: int = 100


class FailedReply(WireModel):
    """Failed deliveries, oldest first."""

    deliveries: list[FailedDelivery]


class RedriveRequest(WireModel):
    """``/v1/webhooks/failed.redrive``: one failed delivery (``delivery_id``),
    or every one of an endpoint and/or failed since a time."""

    delivery_id: str | None = None
    endpoint_id: str | None = None
    since: Instant | None = None
