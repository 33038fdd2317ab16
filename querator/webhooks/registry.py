"""Endpoints in the store: add, read, change (compare-and-set), remove."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from querator.errors import InvalidArgument, Unavailable
from querator.queue.record_store import Stored
from querator.queue.service import AsyncQueueClient
from querator.webhooks.endpoints import Endpoint, EndpointOptions, SecretEntry
from querator.webhooks.errors import EndpointNotFound
from querator.webhooks.layout import ENDPOINT_SLOTS
from querator.webhooks.settings import WebhookSettings
from querator.webhooks.signing import generate_secret
from querator.webhooks.targets import check_url, lookup, pick

__all__ = ["add", "change", "get", "list_all", "remove"]

CAS_ATTEMPTS = 20
REFRESH_AFTER = timedelta(days=90)
"""Records older than this are rewritten when read, long before their item expires."""


async def check_target(url: str, settings: WebhookSettings) -> None:
    """Refuse a URL whose host resolves to a refused address (a name that does
    not resolve yet is accepted: every delivery checks again). ``allow_private``
    admits loopback and private addresses, never cloud metadata."""
    target = check_url(url)
    try:
        addresses = await lookup(target)
    except InvalidArgument:
        return
    pick(target, addresses, allow_private=settings.allow_private)


async def add(aq: AsyncQueueClient, options: EndpointOptions, secret: str | None) -> Endpoint:
    """Store a new endpoint (its options, secret and target already checked)."""
    now = aq.clock.now()
    endpoint = Endpoint(
        id="ep_" + secrets.token_hex(12),
        secrets=(SecretEntry(secret=secret or generate_secret()),),
        created_at=now,
        updated_at=now,
        **options.model_dump(),
    )
    await ENDPOINT_SLOTS.ensure(aq)
    stored = await ENDPOINT_SLOTS.write(aq, endpoint.id, None, endpoint)
    if stored is None:  # a fresh random id: nobody else can hold it
        raise Unavailable(f"could not store endpoint {endpoint.id}")
    return stored.record


async def _read(aq: AsyncQueueClient, endpoint_id: str) -> Stored[Endpoint]:
    if not isinstance(endpoint_id, str) or not endpoint_id or "/" in endpoint_id:
        raise EndpointNotFound(str(endpoint_id))
    await ENDPOINT_SLOTS.ensure(aq)
    stored = await ENDPOINT_SLOTS.read(aq, endpoint_id)
    if stored is None:
        raise EndpointNotFound(endpoint_id)
    return stored


async def get(aq: AsyncQueueClient, endpoint_id: str) -> Endpoint:
    """The endpoint ``endpoint_id``; :class:`EndpointNotFound` if there is none."""
    stored = await _read(aq, endpoint_id)
    if aq.clock.now() - stored.item.created_at > REFRESH_AFTER:
        await ENDPOINT_SLOTS.write(aq, endpoint_id, stored, stored.record)
    return stored.record


async def list_all(aq: AsyncQueueClient) -> list[Endpoint]:
    """Every endpoint, by id."""
    await ENDPOINT_SLOTS.ensure(aq)
    found = await ENDPOINT_SLOTS.read_all(aq)
    now = aq.clock.now()
    for stored in found:
        if now - stored.item.created_at > REFRESH_AFTER:
            await ENDPOINT_SLOTS.write(aq, stored.record.id, stored, stored.record)
    return [stored.record for stored in found]


async def change(
    aq: AsyncQueueClient, endpoint_id: str, edit: Callable[[Endpoint], Endpoint | None]
) -> Endpoint:
    """Apply ``edit`` to the current record and store it (compare-and-set,
    read again on a lost race); ``edit`` returning None changes nothing."""
    for _ in range(CAS_ATTEMPTS):
        current = await _read(aq, endpoint_id)
        edited = edit(current.record)
        if edited is None:
            return current.record
        edited = edited.model_copy(update={"updated_at": aq.clock.now()})
        stored = await ENDPOINT_SLOTS.write(aq, endpoint_id, current, edited)
        if stored is not None:
            return stored.record
    raise Unavailable(f"endpoint {endpoint_id}: too many concurrent changes, try again")


def updated(endpoint: Endpoint, changes: dict[str, Any]) -> Endpoint:
    """``endpoint`` with user ``changes`` checked like a new endpoint's options."""
    fields = set(EndpointOptions.model_fields)
    options = EndpointOptions(**{**endpoint.model_dump(include=fields), **changes})
    return endpoint.model_copy(update=options.model_dump())


async def remove(aq: AsyncQueueClient, endpoint_id: str) -> None:
    """Delete the endpoint's record; its pending deliveries dead-letter when leased."""
    await ENDPOINT_SLOTS.remove(aq, await _read(aq, endpoint_id))
