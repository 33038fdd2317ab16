"""Handlers of ``/v1/webhooks/…``: each calls the method of
:class:`querator.webhooks.AsyncWebhooks` a Python user calls (over the
server's store, with the server's :class:`~querator.webhooks.WebhookSettings`)."""

from __future__ import annotations

from typing import Any

from querator.http.wire.queue import Reply
from querator.http.wire.webhooks import (
    AddEndpointRequest,
    AttemptsReply,
    AttemptsRequest,
    DisableEndpointRequest,
    EndpointRequest,
    EndpointsReply,
    FailedReply,
    FailedRequest,
    MessageRequest,
    RedriveRequest,
    RotateSecretRequest,
    SendRequest,
    UpdateEndpointRequest,
)
from querator.http.wire.workflows import CountReply
from querator.webhooks import AsyncWebhooks, Endpoint, Message


def _hooks(state: Any) -> AsyncWebhooks:
    hooks: AsyncWebhooks = state.webhooks
    return hooks


async def add_endpoint(state: Any, body: AddEndpointRequest) -> Endpoint:
    """Add an endpoint; the answer carries its secret."""
    return await _hooks(state).add_endpoint(body.url, **body.given("url"))


async def get_endpoint(state: Any, body: EndpointRequest) -> Endpoint:
    """One endpoint, with its secrets."""
    return await _hooks(state).get_endpoint(body.endpoint_id)


async def list_endpoints(state: Any, body: object) -> EndpointsReply:
    """Every endpoint, by id."""
    return EndpointsReply(endpoints=await _hooks(state).list_endpoints())


async def update_endpoint(state: Any, body: UpdateEndpointRequest) -> Endpoint:
    """Change the options the request gives."""
    return await _hooks(state).update_endpoint(body.endpoint_id, **body.given("endpoint_id"))


async def disable_endpoint(state: Any, body: DisableEndpointRequest) -> Endpoint:
    """Stop delivering to an endpoint."""
    return await _hooks(state).disable_endpoint(body.endpoint_id, body.reason)


async def enable_endpoint(state: Any, body: EndpointRequest) -> Endpoint:
    """Deliver to an endpoint again."""
    return await _hooks(state).enable_endpoint(body.endpoint_id)


async def rotate_secret(state: Any, body: RotateSecretRequest) -> Endpoint:
    """Give an endpoint a new secret, the old one signing on for ``grace``."""
    return await _hooks(state).rotate_secret(body.endpoint_id, body.secret, grace=body.grace)


async def delete_endpoint(state: Any, body: EndpointRequest) -> Reply:
    """Delete an endpoint."""
    await _hooks(state).delete_endpoint(body.endpoint_id)
    return Reply()


async def send(state: Any, body: SendRequest) -> Message:
    """Send a message to every enabled endpoint whose filter matches."""
    return await _hooks(state).send(
        body.event_type,
        body.payload,
        idempotency_key=body.idempotency_key,
        ordering_key=body.ordering_key,
    )


async def get_message(state: Any, body: MessageRequest) -> Message:
    """One message."""
    return await _hooks(state).get_message(body.message_id)


async def attempts(state: Any, body: AttemptsRequest) -> AttemptsReply:
    """The attempts log of a message or an endpoint."""
    found = await _hooks(state).attempts(
        message_id=body.message_id, endpoint_id=body.endpoint_id, limit=body.limit
    )
    return AttemptsReply(attempts=found)


async def failed(state: Any, body: FailedRequest) -> FailedReply:
    """Failed deliveries waiting to be re-driven."""
    found = await _hooks(state).failed(
        endpoint_id=body.endpoint_id, since=body.since, limit=body.limit
    )
    return FailedReply(deliveries=found)


async def redrive(state: Any, body: RedriveRequest) -> CountReply:
    """Deliver failed deliveries again; how many were re-driven."""
    count = await _hooks(state).redrive(
        body.delivery_id, endpoint_id=body.endpoint_id, since=body.since
    )
    return CountReply(count=count)
