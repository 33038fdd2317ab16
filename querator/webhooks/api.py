"""``Webhooks`` and ``AsyncWebhooks``: endpoints, sending, the attempts log,
failed deliveries and re-drives. The async class holds every operation; the
sync one runs it on its :class:`~querator.Querator`'s event loop."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from typing_extensions import Unpack

from querator.errors import InvalidArgument
from querator.queue.client import QueueClient
from querator.queue.ids import parse_id
from querator.queue.models import StoredItem
from querator.queue.options import check_options
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import check_count, check_duration, check_instant
from querator.webhooks import registry
from querator.webhooks.endpoints import Endpoint, EndpointFields, EndpointOptions, SecretEntry
from querator.webhooks.errors import DeliveryNotFound
from querator.webhooks.inspection import (
    FailedDelivery,
    as_failed,
    attempts_of_endpoint,
    attempts_of_message,
    failed,
)
from querator.webhooks.layout import DEAD, Attempt, Message, ensure_queues
from querator.webhooks.redrive import redrive_items
from querator.webhooks.sending import get_message, prepare, send
from querator.webhooks.settings import WebhookSettings
from querator.webhooks.signing import generate_secret, secret_key

__all__ = ["AsyncWebhooks", "Webhooks"]

T = TypeVar("T")
DEFAULT_GRACE = 86_400.0
"""Seconds an old secret keeps signing after a rotation."""


class AsyncWebhooks:
    """Webhook endpoints and messages in the store of ``aq`` (async).

    Every call checks its input before writing anything: a malformed URL, a
    private target, a bad event-type filter or an oversize payload raise a
    :class:`~querator.errors.InvalidArgument` (or a subclass), an unknown
    endpoint :class:`~querator.webhooks.errors.EndpointNotFound`.
    """

    def __init__(self, aq: AsyncQueueClient, settings: WebhookSettings | None = None) -> None:
        self.aq = aq
        self.settings = settings or WebhookSettings()
        self._ready = False

    async def _open(self) -> AsyncQueueClient:
        if not self._ready:
            await ensure_queues(self.aq, self.settings)
            self._ready = True
        return self.aq

    # -- endpoints -------------------------------------------------------------
    async def add_endpoint(self, url: str, **fields: Unpack[EndpointFields]) -> Endpoint:
        """Add an endpoint and return it (with its ``secret``, generated unless given).

        ``event_types`` filters what it gets (exact types, ``prefix.*``, ``*``;
        None: everything). ``rate_limit`` (deliveries/s) and ``max_in_flight``
        apply per delivery worker. ``headers`` are sent with every delivery.
        ``ordered`` delivers messages of one ``ordering_key`` one at a time.
        """
        check_options("add_endpoint", fields, EndpointFields)
        event_types, secret = fields.get("event_types"), fields.get("secret")
        options = EndpointOptions(
            url=url,
            description=fields.get("description", ""),
            event_types=None if event_types is None else tuple(event_types),
            rate_limit=fields.get("rate_limit"),
            max_in_flight=fields.get("max_in_flight", 10),
            headers=fields.get("headers") or {},
            ordered=fields.get("ordered", False),
        )
        if secret is not None:
            secret_key(secret)
        await registry.check_target(url, self.settings)
        return await registry.add(await self._open(), options, secret)

    async def get_endpoint(self, endpoint_id: str) -> Endpoint:
        """The endpoint ``endpoint_id``."""
        return await registry.get(await self._open(), endpoint_id)

    async def list_endpoints(self) -> list[Endpoint]:
        """Every endpoint, by id."""
        return await registry.list_all(await self._open())

    async def update_endpoint(self, endpoint_id: str, **changes: Any) -> Endpoint:
        """Change options of an endpoint (the keyword arguments of
        :meth:`add_endpoint` but ``secret``); an unknown name is an error."""
        aq = await self._open()
        checked = registry.updated(await registry.get(aq, endpoint_id), changes)
        if "url" in changes:
            await registry.check_target(checked.url, self.settings)
        return await registry.change(aq, endpoint_id, lambda e: registry.updated(e, changes))

    async def disable_endpoint(self, endpoint_id: str, reason: str = "") -> Endpoint:
        """Stop delivering to the endpoint; deliveries due meanwhile are dead-lettered
        (re-drive them after :meth:`enable_endpoint`)."""
        text = _reason(reason)
        return await registry.change(
            await self._open(),
            endpoint_id,
            lambda e: e.model_copy(update={"disabled": True, "disabled_reason": text}),
        )

    async def enable_endpoint(self, endpoint_id: str) -> Endpoint:
        """Deliver to the endpoint again (its failure streak starts over)."""
        update = {"disabled": False, "disabled_reason": "", "failing_since": None}
        return await registry.change(
            await self._open(), endpoint_id, lambda e: e.model_copy(update=update)
        )

    async def rotate_secret(
        self, endpoint_id: str, secret: str | None = None, *, grace: float = DEFAULT_GRACE
    ) -> Endpoint:
        """Give the endpoint a new secret (generated unless given); the old one
        keeps signing for ``grace`` seconds, so webhooks carry both signatures
        while the receiver switches over."""
        new = secret or generate_secret()
        secret_key(new, "secret")
        check_duration("grace", grace, allow_zero=True)

        def rotate(e: Endpoint) -> Endpoint:
            now = datetime.now(UTC)
            expires = now + timedelta(seconds=grace)
            old = [SecretEntry(secret=e.secret, expires_at=expires)] if grace else []
            kept = [s for s in e.secrets[1:] if s.expires_at is not None and s.expires_at > now]
            return e.model_copy(update={"secrets": (SecretEntry(secret=new), *old, *kept)})

        return await registry.change(await self._open(), endpoint_id, rotate)

    async def delete_endpoint(self, endpoint_id: str) -> None:
        """Delete the endpoint; its pending deliveries are dead-lettered when due."""
        await registry.remove(await self._open(), endpoint_id)

    # -- messages --------------------------------------------------------------
    async def send(
        self,
        event_type: str,
        payload: Any,
        *,
        idempotency_key: str | None = None,
        ordering_key: str | None = None,
    ) -> Message:
        """Send ``payload`` (any JSON value) as ``event_type`` to every enabled
        endpoint whose filter matches: one delivery per endpoint. The same
        ``idempotency_key`` returns the same message (and sends nothing more)
        while the message is kept (``retention``)."""
        prepared = prepare(self.settings, event_type, payload, idempotency_key, ordering_key)
        return await send(await self._open(), prepared)

    async def get_message(self, message_id: str) -> Message:
        """The message ``message_id``."""
        return await get_message(await self._open(), message_id)

    async def attempts(
        self,
        *,
        message_id: str | None = None,
        endpoint_id: str | None = None,
        limit: int = 100,
    ) -> list[Attempt]:
        """The attempts log: every attempt of a message (by endpoint, oldest
        first), or the ``limit`` newest attempts to an endpoint."""
        aq = await self._open()
        check_count("limit", limit, 1, 10_000)
        if message_id is not None:
            return (await attempts_of_message(aq, message_id, endpoint_id))[-limit:]
        if endpoint_id is None:
            raise InvalidArgument("message_id", "give a message_id, an endpoint_id or both")
        await registry.get(aq, endpoint_id)
        return await attempts_of_endpoint(aq, endpoint_id, limit)

    # -- failed deliveries -----------------------------------------------------
    async def failed(
        self,
        *,
        endpoint_id: str | None = None,
        since: datetime | None = None,
        limit: int = 100,
    ) -> list[FailedDelivery]:
        """Failed deliveries waiting to be re-driven, oldest first."""
        check_count("limit", limit, 1, 10_000)
        check_instant("since", since)
        shown = []
        async for _, item in failed(await self._open(), endpoint_id, since):
            shown.append(item)
            if len(shown) >= limit:
                break
        return shown

    async def redrive(
        self,
        delivery_id: str | None = None,
        *,
        endpoint_id: str | None = None,
        since: datetime | None = None,
    ) -> int:
        """Deliver failed deliveries again, from the first attempt of the
        schedule: one (``delivery_id``, from :meth:`failed`), every one of an
        endpoint, every one failed since a time, or both of the latter.
        Returns how many were re-driven."""
        aq = await self._open()
        check_instant("since", since)
        if delivery_id is not None:
            if endpoint_id is not None or since is not None:
                raise InvalidArgument("delivery_id", "give it alone, or endpoint_id/since")
            item = await _dead_item(aq, delivery_id)
            return await redrive_items(aq, [item])
        if endpoint_id is None and since is None:
            raise InvalidArgument("redrive", "give a delivery_id, an endpoint_id or since")
        if endpoint_id is not None:
            await registry.get(aq, endpoint_id)
        items = [item async for item, _ in failed(aq, endpoint_id, since)]
        return await redrive_items(aq, items)


async def _dead_item(aq: AsyncQueueClient, delivery_id: str) -> StoredItem:
    if not isinstance(delivery_id, str):
        raise DeliveryNotFound(str(delivery_id))
    info = await aq.get_queue(DEAD)
    address = parse_id(delivery_id)
    if address is None or address.queue_id != info.queue_id:
        raise DeliveryNotFound(delivery_id)
    page = await aq.list_items(DEAD, partition=address.partition, pivot=delivery_id, limit=1)
    if not page or page[0].id != delivery_id or as_failed(page[0]) is None:
        raise DeliveryNotFound(delivery_id)
    return page[0]


def _reason(reason: object) -> str:
    if not isinstance(reason, str) or len(reason) > 2_000 or "\x00" in reason:
        raise InvalidArgument("reason", "must be a string of at most 2000 characters, no NUL")
    return reason


class Webhooks:
    """Webhook endpoints and messages in the store of a sync :class:`QueueClient`:
    the methods of :class:`AsyncWebhooks`, without ``await``.

    ```python
    hooks = Webhooks(q)
    endpoint = hooks.add_endpoint("https://example.com/hook", event_types=["invoice.*"])
    hooks.send("invoice.paid", {"id": "in_1"}, idempotency_key="in_1/paid")
    ```
    """

    def __init__(self, q: QueueClient, settings: WebhookSettings | None = None) -> None:
        self.q = q
        self.aio = AsyncWebhooks(q.aio, settings)
        """The async twin (usable on the client's loop only)."""

    @property
    def settings(self) -> WebhookSettings:
        """The settings in use."""
        return self.aio.settings

    def _call(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        return self.q.call(fn, *args, **kwargs)

    def add_endpoint(self, url: str, **fields: Unpack[EndpointFields]) -> Endpoint:
        """See :meth:`AsyncWebhooks.add_endpoint`."""
        return self._call(self.aio.add_endpoint, url, **fields)

    def get_endpoint(self, endpoint_id: str) -> Endpoint:
        """See :meth:`AsyncWebhooks.get_endpoint`."""
        return self._call(self.aio.get_endpoint, endpoint_id)

    def list_endpoints(self) -> list[Endpoint]:
        """See :meth:`AsyncWebhooks.list_endpoints`."""
        return self._call(self.aio.list_endpoints)

    def update_endpoint(self, endpoint_id: str, **changes: Any) -> Endpoint:
        """See :meth:`AsyncWebhooks.update_endpoint`."""
        return self._call(self.aio.update_endpoint, endpoint_id, **changes)

    def disable_endpoint(self, endpoint_id: str, reason: str = "") -> Endpoint:
        """See :meth:`AsyncWebhooks.disable_endpoint`."""
        return self._call(self.aio.disable_endpoint, endpoint_id, reason)

    def enable_endpoint(self, endpoint_id: str) -> Endpoint:
        """See :meth:`AsyncWebhooks.enable_endpoint`."""
        return self._call(self.aio.enable_endpoint, endpoint_id)

    def rotate_secret(
        self, endpoint_id: str, secret: str | None = None, *, grace: float = DEFAULT_GRACE
    ) -> Endpoint:
        """See :meth:`AsyncWebhooks.rotate_secret`."""
        return self._call(self.aio.rotate_secret, endpoint_id, secret, grace=grace)

    def delete_endpoint(self, endpoint_id: str) -> None:
        """See :meth:`AsyncWebhooks.delete_endpoint`."""
        self._call(self.aio.delete_endpoint, endpoint_id)

    def send(
        self,
        event_type: str,
        payload: Any,
        *,
        idempotency_key: str | None = None,
        ordering_key: str | None = None,
    ) -> Message:
        """See :meth:`AsyncWebhooks.send`."""
        return self._call(
            self.aio.send,
            event_type,
            payload,
            idempotency_key=idempotency_key,
            ordering_key=ordering_key,
        )

    def get_message(self, message_id: str) -> Message:
        """See :meth:`AsyncWebhooks.get_message`."""
        return self._call(self.aio.get_message, message_id)

    def attempts(
        self, *, message_id: str | None = None, endpoint_id: str | None = None, limit: int = 100
    ) -> list[Attempt]:
        """See :meth:`AsyncWebhooks.attempts`."""
        return self._call(
            self.aio.attempts, message_id=message_id, endpoint_id=endpoint_id, limit=limit
        )

    def failed(
        self, *, endpoint_id: str | None = None, since: datetime | None = None, limit: int = 100
    ) -> list[FailedDelivery]:
        """See :meth:`AsyncWebhooks.failed`."""
        return self._call(self.aio.failed, endpoint_id=endpoint_id, since=since, limit=limit)

    def redrive(
        self,
        delivery_id: str | None = None,
        *,
        endpoint_id: str | None = None,
        since: datetime | None = None,
    ) -> int:
        """See :meth:`AsyncWebhooks.redrive`."""
        return self._call(self.aio.redrive, delivery_id, endpoint_id=endpoint_id, since=since)
