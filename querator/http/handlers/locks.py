"""Handlers of ``/v1/locks.*``: each calls :mod:`querator.locks.store`, which
the library's semaphores call too (no background renewal here: the HTTP
client renews by itself)."""

from __future__ import annotations

from typing import Any

from querator.errors import QueueNotFound
from querator.http.wire.locks import (
    AcquireRequest,
    CreateRequest,
    HeldRequest,
    PermitReply,
    SemaphoresReply,
)
from querator.http.wire.queue import Empty, Reply
from querator.locks import store
from querator.locks.listing import list_semaphores_async
from querator.locks.names import index_of, queue_of, token_of
from querator.queue.models import Ref
from querator.queue.service import AsyncQueueClient


async def create(aq: AsyncQueueClient, body: CreateRequest) -> Reply:
    """Create a semaphore, or bring it to a limit and lease (idempotent)."""
    await store.ensure(aq, body.name, body.limit, body.lease)
    return Reply()


async def _lease(aq: AsyncQueueClient, name: str) -> float:
    """The lease duration of semaphore ``name``'s permits."""
    return (await aq.queue_info(queue_of(name))).settings.lease_timeout


async def acquire(state: Any, body: AcquireRequest) -> PermitReply:
    """Take a free permit, waiting up to ``request_timeout`` (454 when none was)."""
    aq: AsyncQueueClient = state.aq
    if body.limit is not None:
        await store.ensure(aq, body.name, body.limit, body.lease)
    else:
        try:
            await aq.queue_info(queue_of(body.name))
        except QueueNotFound:
            await store.ensure(aq, body.name, 1, body.lease)
    leased = await state.unless_stopping(
        lambda: store.acquire(aq, body.name, body.client_id, body.request_timeout)
    )
    token = token_of(leased.payload, leased.version)
    lease = await _lease(aq, body.name)
    return PermitReply.of(body.name, index_of(leased.dedup_key), leased, token, lease)


async def renew(aq: AsyncQueueClient, body: HeldRequest) -> PermitReply:
    """Extend a held permit's lease (409 LockLost when it was lost)."""
    renewed = await store.renew(aq, body.name, body.id, body.version)
    token = body.version if body.token is None else body.token
    lease = await _lease(aq, body.name)
    return PermitReply.of(body.name, body.permit, renewed, token, lease)


async def release(aq: AsyncQueueClient, body: HeldRequest) -> Reply:
    """Give a held permit back: free at once (409 LockLost when it was lost)."""
    token = body.version if body.token is None else body.token
    held = Ref(queue_of(body.name), body.id, body.version)
    await store.release(aq, body.name, held, body.permit, token)
    return Reply()


async def list_locks(aq: AsyncQueueClient, body: Empty) -> SemaphoresReply:
    """Every semaphore with its limit, free permits and holders."""
    return SemaphoresReply(semaphores=await list_semaphores_async(aq))
