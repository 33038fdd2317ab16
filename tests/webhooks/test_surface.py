"""The public names of querator.webhooks are a contract; each has a docstring."""

from __future__ import annotations

import inspect

import querator.webhooks
from querator.errors import QueratorError


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
