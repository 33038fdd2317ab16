"""Webhooks through the HTTP API and the HTTP client's ``webhooks``: a live
server (``--webhooks-allow-private``), a delivery worker on the same store,
and a real receiver on 127.0.0.1."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from http_server import serve
from polling import wait_for
from webhooks.helpers import FAST
from webhooks.http_receiver import Receiver, serving

from querator import Querator
from querator.errors import InvalidArgument
from querator.http import Querator as HttpQuerator
from querator.webhooks import (
    DeliveryNotFound,
    DeliveryWorker,
    EndpointNotFound,
    MessageNotFound,
    Outcome,
    verify,
)


@pytest.fixture
def http(tmp_path: Path) -> Iterator[tuple[HttpQuerator, Receiver]]:
    """An HTTP client of a server over a SQLite store, a delivery worker on
    that store, and a receiver."""
    url = f"sqlite:///{tmp_path / 'hooks.db'}"
    with (
        serve(url, "--webhooks-allow-private") as base,
        Querator(url) as q,
        HttpQuerator(base) as client,
        serving() as receiver,
    ):
        worker = DeliveryWorker(q, FAST, endpoint_ttl=0.2, shutdown_grace=2.0)
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        try:
            yield client, receiver
        finally:
            worker.stop()
            thread.join(timeout=20)
    assert not thread.is_alive(), "the delivery worker did not stop"


def test_endpoints_are_managed_and_messages_delivered_over_http(
    http: tuple[HttpQuerator, Receiver],
) -> None:
    client, receiver = http
    hooks = client.webhooks
    endpoint = hooks.add_endpoint(receiver.url("ok"), event_types=["invoice.*"])
    assert endpoint.secret.startswith("whsec_")
    assert [e.id for e in hooks.list_endpoints()] == [endpoint.id]
    changed = hooks.update_endpoint(endpoint.id, description="billing", rate_limit=50.0)
    assert (changed.description, changed.rate_limit) == ("billing", 50.0)
    assert hooks.get_endpoint(endpoint.id).description == "billing"
    assert hooks.disable_endpoint(endpoint.id, "maintenance").disabled_reason == "maintenance"
    assert not hooks.enable_endpoint(endpoint.id).disabled
    rotated = hooks.rotate_secret(endpoint.id, grace=60)
    assert rotated.secret != endpoint.secret and len(rotated.secrets) == 2

    message = hooks.send("invoice.paid", {"id": "in_1"}, idempotency_key="in_1/paid")
    assert hooks.send("invoice.paid", {"id": "in_1"}, idempotency_key="in_1/paid") == message
    assert message.endpoints == (endpoint.id,)
    assert hooks.get_message(message.id) == message
    wait_for(lambda: receiver.at("ok"), timeout=30, message="the delivery")
    got = receiver.at("ok")[0]
    assert verify(rotated.secret, got.headers, got.body) == {"id": "in_1"}
    attempts = wait_for(lambda: hooks.attempts(message_id=message.id), timeout=30)
    assert [a.outcome for a in attempts] == [Outcome.DELIVERED]
    assert hooks.attempts(endpoint_id=endpoint.id) == attempts

    hooks.delete_endpoint(endpoint.id)
    with pytest.raises(EndpointNotFound):
        hooks.get_endpoint(endpoint.id)


def test_failed_deliveries_are_listed_and_redriven_over_http(
    http: tuple[HttpQuerator, Receiver],
) -> None:
    client, receiver = http
    hooks = client.webhooks
    before = datetime.now(UTC) - timedelta(seconds=1)
    endpoint = hooks.add_endpoint(receiver.url("fail"))
    hooks.send("order.shipped", {"n": 1})
    failed = wait_for(lambda: hooks.failed(endpoint_id=endpoint.id), timeout=30)
    assert failed[0].attempts == len(FAST.schedule)
    assert hooks.failed(since=before) == failed
    hooks.update_endpoint(endpoint.id, url=receiver.url("ok"))
    assert hooks.redrive(failed[0].id) == 1
    with pytest.raises(DeliveryNotFound):
        hooks.redrive(failed[0].id)
    wait_for(lambda: receiver.at("ok"), timeout=30, message="the re-driven delivery")
    assert hooks.failed() == []


def test_bad_input_gets_the_library_errors_over_http(
    http: tuple[HttpQuerator, Receiver],
) -> None:
    client, _ = http
    hooks = client.webhooks
    with pytest.raises(InvalidArgument) as bad:
        hooks.add_endpoint("ftp://example.com/x")
    assert bad.value.field == "url"
    with pytest.raises(InvalidArgument) as refused:
        hooks.add_endpoint("http://169.254.169.254/latest")
    assert refused.value.field == "url"
    with pytest.raises(MessageNotFound):
        hooks.get_message("msg_nope")
    with pytest.raises(InvalidArgument) as neither:
        hooks.attempts()
    assert neither.value.field == "message_id"
    with pytest.raises(InvalidArgument):
        hooks.redrive()
    with pytest.raises(InvalidArgument):
        hooks.update_endpoint("ep_nope", colour="red")
    with pytest.raises(EndpointNotFound):
        hooks.disable_endpoint("ep_nope")
