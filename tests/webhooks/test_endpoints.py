"""Endpoints in the store, and bad input: a typed error, nothing written."""

from __future__ import annotations

from typing import Any

import pytest

from querator import Querator
from querator.errors import InvalidArgument
from querator.webhooks import (
    EndpointNotFound,
    MessageNotFound,
    PayloadTooLarge,
    TargetRefused,
    Webhooks,
    WebhookSettings,
)
from querator.webhooks.layout import queue_settings
from querator.webhooks.signing import generate_secret

URL = "http://127.0.0.1:9/hook"


def stored(q: Querator) -> dict[str, int]:
    """Items in each webhook queue (absent: the queue does not exist)."""
    names = {info.name for info in q.list_queues(limit=1000)}
    return {
        name: q.stats(name).total for name in queue_settings(WebhookSettings()) if name in names
    }


def test_endpoints_are_added_changed_and_removed(hooks: Webhooks) -> None:
    secret = generate_secret()
    endpoint = hooks.add_endpoint(
        URL, description="billing", event_types=["invoice.*"], secret=secret, rate_limit=5
    )
    assert endpoint.secret == secret and endpoint.id.startswith("ep_")
    assert secret not in repr(endpoint)
    assert hooks.get_endpoint(endpoint.id) == endpoint
    changed = hooks.update_endpoint(endpoint.id, description="billing v2", max_in_flight=3)
    assert (changed.description, changed.max_in_flight, changed.event_types) == (
        "billing v2",
        3,
        ("invoice.*",),
    )
    disabled = hooks.disable_endpoint(endpoint.id, "maintenance")
    assert disabled.disabled and disabled.disabled_reason == "maintenance"
    assert not hooks.enable_endpoint(endpoint.id).disabled
    rotated = hooks.rotate_secret(endpoint.id, grace=60)
    assert rotated.secret != secret and [s.secret for s in rotated.secrets][1] == secret
    other = hooks.add_endpoint(URL)
    assert [e.id for e in hooks.list_endpoints()] == sorted([endpoint.id, other.id])
    hooks.delete_endpoint(endpoint.id)
    assert [e.id for e in hooks.list_endpoints()] == [other.id]
    with pytest.raises(EndpointNotFound):
        hooks.get_endpoint(endpoint.id)


BAD_ADDS: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"url": "not a url"}, InvalidArgument, "url"),
    ({"url": "ftp://example.com/x"}, InvalidArgument, "url"),
    ({"url": "http://10.0.0.1/x"}, TargetRefused, "private"),
    ({"url": "http://localhost:8000/x"}, TargetRefused, "loopback.*--allow-private"),
    ({"url": "http://169.254.169.254/latest"}, TargetRefused, "metadata"),
    ({"url": "http://[2002:7f00:1::]/x"}, TargetRefused, "6to4 form of 127.0.0.1"),
    ({"url": "http://[64:ff9b::a00:1]/x"}, TargetRefused, "NAT64 form of 10.0.0.1"),
    ({"url": URL, "event_types": ["bad type!"]}, InvalidArgument, "event_types"),
    ({"url": URL, "event_types": []}, InvalidArgument, "event_types"),
    ({"url": URL, "event_types": ["a.*.b"]}, InvalidArgument, "event_types"),
    ({"url": URL, "secret": "whsec_nope"}, InvalidArgument, "secret"),
    ({"url": URL, "rate_limit": 0}, InvalidArgument, "rate_limit"),
    ({"url": URL, "max_in_flight": 0}, InvalidArgument, "max_in_flight"),
    ({"url": URL, "headers": {"webhook-id": "x"}}, InvalidArgument, "headers"),
    ({"url": URL, "headers": {"x-a": "b\r\nc"}}, InvalidArgument, "headers"),
]


def test_bad_endpoints_are_refused_and_nothing_is_written(q: Querator) -> None:
    strict = Webhooks(q)  # allow_private off
    for args, error, names in BAD_ADDS:
        with pytest.raises(error, match=names):
            strict.add_endpoint(**args)
    assert stored(q) == {}  # not even the queues were made
    strict.add_endpoint("http://93.184.215.14/hook")
    before = stored(q)
    for args, error, names in BAD_ADDS:
        with pytest.raises(error, match=names):
            strict.add_endpoint(**args)
    assert stored(q) == before


def test_allow_private_never_admits_cloud_metadata(q: Querator, hooks: Webhooks) -> None:
    for url in (
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/latest/",
        "http://[::ffff:169.254.169.254]/",
    ):
        with pytest.raises(TargetRefused, match="never allowed, even with --allow-private"):
            hooks.add_endpoint(url)  # hooks allow private targets
    assert stored(q) == {}
    endpoint = hooks.add_endpoint("http://127.0.0.1:9/hook")
    with pytest.raises(TargetRefused, match="cloud metadata"):
        hooks.update_endpoint(endpoint.id, url="http://169.254.169.254/")


def test_bad_sends_and_unknown_names_are_refused_and_nothing_is_written(
    q: Querator, hooks: Webhooks
) -> None:
    small = Webhooks(q, WebhookSettings(max_payload_bytes=100, allow_private=True))
    with pytest.raises(PayloadTooLarge, match="over the cap of 100 bytes"):
        small.send("a.b", {"blob": "x" * 200})
    assert stored(q) == {}
    endpoint = hooks.add_endpoint(URL)
    before = stored(q)
    with pytest.raises(PayloadTooLarge):
        small.send("a.b", {"blob": "x" * 200})
    for event_type in ("", "a b", "a..b", 7):
        with pytest.raises(InvalidArgument, match="event_type"):
            hooks.send(event_type, {})  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="payload"):
        hooks.send("a.b", {"when": object()})
    with pytest.raises(InvalidArgument, match="payload"):
        hooks.send("a.b", float("nan"))
    with pytest.raises(InvalidArgument, match="idempotency_key"):
        hooks.send("a.b", {}, idempotency_key="")
    for call in (
        lambda: hooks.update_endpoint("ep_missing", description="x"),
        lambda: hooks.disable_endpoint("ep_missing"),
        lambda: hooks.rotate_secret("ep_missing"),
        lambda: hooks.delete_endpoint("ep_missing"),
        lambda: hooks.attempts(endpoint_id="ep_missing"),
        lambda: hooks.redrive(endpoint_id="ep_missing"),
    ):
        with pytest.raises(EndpointNotFound):
            call()
    with pytest.raises(MessageNotFound):
        hooks.attempts(message_id="msg_missing")
    with pytest.raises(InvalidArgument, match="colour"):
        hooks.update_endpoint(endpoint.id, colour="blue")
    with pytest.raises(InvalidArgument, match="url"):
        hooks.update_endpoint(endpoint.id, url="nope")
    with pytest.raises(TargetRefused):
        Webhooks(q).update_endpoint(endpoint.id, url="http://192.168.0.1/")
    assert stored(q) == before
    assert hooks.get_endpoint(endpoint.id) == endpoint
