"""The public names of querator.webhooks are a contract; each has a docstring."""

from __future__ import annotations

import inspect

import pytest

import querator.webhooks
from querator import Querator
from querator.errors import InvalidArgument, QueratorError


def test_exported_names_are_pinned() -> None:
    assert sorted(querator.webhooks.__all__) == [
        "AsyncDeliveryWorker",
        "AsyncWebhooks",
        "Attempt",
        "DEFAULT_SCHEDULE",
        "DeliveryNotFound",
        "DeliveryWorker",
        "Endpoint",
        "EndpointNotFound",
        "FailedDelivery",
        "Message",
        "MessageNotFound",
        "Outcome",
        "PayloadTooLarge",
        "TargetRefused",
        "VerificationFailed",
        "WebhookSettings",
        "Webhooks",
        "generate_secret",
        "sign",
        "verify",
    ]


def test_every_public_name_and_method_has_a_docstring_and_errors_share_the_root() -> None:
    missing = []
    for name in querator.webhooks.__all__:
        obj = getattr(querator.webhooks, name)
        if inspect.isclass(obj) and issubclass(obj, Exception):
            assert issubclass(obj, QueratorError), name
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if not inspect.getdoc(obj):
            missing.append(name)
        for attr, member in vars(obj).items() if inspect.isclass(obj) else ():
            if (
                not attr.startswith("_")
                and inspect.isfunction(member)
                and not inspect.getdoc(member)
            ):
                missing.append(f"{name}.{attr}")
    assert missing == []


def test_sync_and_async_webhooks_offer_the_same_methods() -> None:
    def public(cls: type) -> set[str]:
        return {n for n, _ in inspect.getmembers(cls, inspect.isfunction) if not n.startswith("_")}

    assert public(querator.webhooks.Webhooks) == public(querator.webhooks.AsyncWebhooks)


def test_the_delivery_workers_take_one_declared_option_set() -> None:
    """Sync and async workers take the same options, checked by name and value."""
    with Querator("memory://") as q:
        worker = querator.webhooks.DeliveryWorker(q, batch_size=7, poll_timeout=0.5)
        assert (worker.worker.batch_size, worker.worker.poll_timeout) == (7, 0.5)
        with pytest.raises(InvalidArgument) as misspelt:
            querator.webhooks.DeliveryWorker(q, concurency=3)  # type: ignore[call-arg]
        assert misspelt.value.field == "concurency"
        with pytest.raises(InvalidArgument) as bad:
            querator.webhooks.AsyncDeliveryWorker(q.aio, shutdown_grace=-1)
        assert bad.value.field == "shutdown_grace"
