"""The async API: AsyncWebhooks and AsyncDeliveryWorker on an AsyncQuerator."""

from __future__ import annotations

import anyio
import pytest
from polling import await_for

from querator import AsyncQuerator
from querator.webhooks import AsyncDeliveryWorker, AsyncWebhooks, Outcome
from webhooks.helpers import FAST, check_signed
from webhooks.http_receiver import Receiver


@pytest.mark.anyio
@pytest.mark.parametrize("backend_name", ["memory", "sqlite"], indirect=True)
async def test_async_send_and_deliver(aq: AsyncQuerator, receiver: Receiver) -> None:
    hooks = AsyncWebhooks(aq, FAST)
    endpoint = await hooks.add_endpoint(receiver.url("ok"))
    message = await hooks.send("a.b", {"n": 1}, idempotency_key="a-1")
    worker = AsyncDeliveryWorker(aq, FAST, concurrency=8)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(worker.arun)
        await await_for(lambda: receiver.at("ok"))
        worker.stop()
    [got] = receiver.at("ok")
    assert check_signed(endpoint.secret, got) == {"n": 1}
    [attempt] = await hooks.attempts(message_id=message.id)
    assert attempt.outcome is Outcome.DELIVERED
    assert (await hooks.send("a.b", {"n": 1}, idempotency_key="a-1")).id == message.id
