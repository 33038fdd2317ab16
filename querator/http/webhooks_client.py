"""Webhooks over HTTP: :class:`querator.webhooks.AsyncWebhooks` and
:class:`~querator.webhooks.Webhooks`'s methods, same arguments, return types
and exceptions, each one call to ``/v1/webhooks/…`` (``q.webhooks`` of the
HTTP clients). The server's settings apply (``allow_private``, the payload cap)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

from typing_extensions import Unpack

from querator.http.callers import LoopOwner, Poster
from querator.http.durations import format_duration
from querator.http.wire import queue as wq
from querator.http.wire import webhooks as wh
from querator.http.wire.workflows import CountReply
from querator.queue.validation import check_duration
from querator.webhooks.api import DEFAULT_GRACE, AsyncWebhooks, Webhooks
from querator.webhooks.endpoints import Endpoint, EndpointFields
from querator.webhooks.inspection import FailedDelivery
from querator.webhooks.layout import Attempt, Message
from querator.webhooks.settings import WebhookSettings

T = TypeVar("T")


def _instant(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


class AsyncHttpWebhooks(AsyncWebhooks):
    """The webhook operations of a querator HTTP server (async)."""

    def __init__(self, client: Poster) -> None:  # no store here: the server's
        self.client = client
        self.settings = WebhookSettings()
        """Defaults only: the server checks every call against its own settings."""

    async def add_endpoint(self, url: str, **fields: Unpack[EndpointFields]) -> Endpoint:
        """See :meth:`AsyncWebhooks.add_endpoint`."""
        body = {"url": url, **fields}
        return await self.client._post("/v1/webhooks/endpoints.add", body, Endpoint)

    async def get_endpoint(self, endpoint_id: str) -> Endpoint:
        """See :meth:`AsyncWebhooks.get_endpoint`."""
        body = {"endpoint_id": endpoint_id}
        return await self.client._post("/v1/webhooks/endpoints.get", body, Endpoint)

    async def list_endpoints(self) -> list[Endpoint]:
        """See :meth:`AsyncWebhooks.list_endpoints`."""
        reply = await self.client._post("/v1/webhooks/endpoints.list", {}, wh.EndpointsReply)
        return reply.endpoints

    async def update_endpoint(self, endpoint_id: str, **changes: Any) -> Endpoint:
        """See :meth:`AsyncWebhooks.update_endpoint`."""
        body = {**changes, "endpoint_id": endpoint_id}
        return await self.client._post("/v1/webhooks/endpoints.update", body, Endpoint)

    async def disable_endpoint(self, endpoint_id: str, reason: str = "") -> Endpoint:
        """See :meth:`AsyncWebhooks.disable_endpoint`."""
        body = {"endpoint_id": endpoint_id, "reason": reason}
        return await self.client._post("/v1/webhooks/endpoints.disable", body, Endpoint)

    async def enable_endpoint(self, endpoint_id: str) -> Endpoint:
        """See :meth:`AsyncWebhooks.enable_endpoint`."""
        body = {"endpoint_id": endpoint_id}
        return await self.client._post("/v1/webhooks/endpoints.enable", body, Endpoint)

    async def rotate_secret(
        self, endpoint_id: str, secret: str | None = None, *, grace: float = DEFAULT_GRACE
    ) -> Endpoint:
        """See :meth:`AsyncWebhooks.rotate_secret`."""
        grace = check_duration("grace", grace, allow_zero=True)
        body = {"endpoint_id": endpoint_id, "secret": secret, "grace": format_duration(grace)}
        return await self.client._post("/v1/webhooks/endpoints.rotate_secret", body, Endpoint)

    async def delete_endpoint(self, endpoint_id: str) -> None:
        """See :meth:`AsyncWebhooks.delete_endpoint`."""
        body = {"endpoint_id": endpoint_id}
        await self.client._post("/v1/webhooks/endpoints.delete", body, wq.Reply)

    async def send(
        self,
        event_type: str,
        payload: Any,
        *,
        idempotency_key: str | None = None,
        ordering_key: str | None = None,
    ) -> Message:
        """See :meth:`AsyncWebhooks.send`."""
        body = {
            "event_type": event_type,
            "payload": payload,
            "idempotency_key": idempotency_key,
            "ordering_key": ordering_key,
        }
        return await self.client._post("/v1/webhooks/messages.send", body, Message)

    async def get_message(self, message_id: str) -> Message:
        """See :meth:`AsyncWebhooks.get_message`."""
        body = {"message_id": message_id}
        return await self.client._post("/v1/webhooks/messages.get", body, Message)

    async def attempts(
        self,
        *,
        message_id: str | None = None,
        endpoint_id: str | None = None,
        limit: int = 100,
    ) -> list[Attempt]:
        """See :meth:`AsyncWebhooks.attempts`."""
        body = {"message_id": message_id, "endpoint_id": endpoint_id, "limit": limit}
        reply = await self.client._post("/v1/webhooks/attempts.list", body, wh.AttemptsReply)
        return reply.attempts

    async def failed(
        self,
        *,
        endpoint_id: str | None = None,
        since: datetime | None = None,
        limit: int = 100,
    ) -> list[FailedDelivery]:
        """See :meth:`AsyncWebhooks.failed`."""
        body = {"endpoint_id": endpoint_id, "since": _instant(since), "limit": limit}
        reply = await self.client._post("/v1/webhooks/failed.list", body, wh.FailedReply)
        return reply.deliveries

    async def redrive(
        self,
        delivery_id: str | None = None,
        *,
        endpoint_id: str | None = None,
        since: datetime | None = None,
    ) -> int:
        """See :meth:`AsyncWebhooks.redrive`."""
        body = {"delivery_id": delivery_id, "endpoint_id": endpoint_id, "since": _instant(since)}
        return (await self.client._post("/v1/webhooks/failed.redrive", body, CountReply)).count


class HttpWebhooks(Webhooks):
    """The webhook operations of a querator HTTP server (sync): the methods
    of :class:`~querator.webhooks.Webhooks`, run on the client's loop."""

    def __init__(self, q: LoopOwner) -> None:  # no store client (``q``) here: the server's
        self.client = q
        self.aio: AsyncWebhooks = q.aio.webhooks
        """The async twin (usable on the client's loop only)."""

    def _call(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        return self.client.call(fn, *args, **kwargs)
