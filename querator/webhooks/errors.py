"""The webhook layer's errors, under :class:`querator.errors.QueratorError`.

```
QueratorError
├── InvalidArgument
│   ├── TargetRefused        an endpoint URL resolves to a refused address (SSRF guard)
│   └── PayloadTooLarge      a message body over the size cap
├── EndpointNotFound         no endpoint with that id
├── DeliveryNotFound         no failed delivery with that id
├── MessageNotFound          no message with that id (or it passed its retention)
└── VerificationFailed       a receiver's check of a webhook's signature failed
```
"""

from __future__ import annotations

from querator.errors import InvalidArgument, QueratorError

__all__ = [
    "DeliveryNotFound",
    "EndpointNotFound",
    "MessageNotFound",
    "PayloadTooLarge",
    "TargetRefused",
    "VerificationFailed",
]


class TargetRefused(InvalidArgument):
    """An endpoint's host is, or resolves to, an address deliveries may not
    reach: loopback, private, link-local … while ``allow_private`` is off, or
    cloud metadata (always). ``allowable`` is True when ``allow_private``
    would admit it (the message then says how)."""

    def __init__(self, url: str, address: str, why: str, allowable: bool = False) -> None:
        self.address = address
        self.allowable = allowable
        hint = (
            "allow loopback and private targets with --allow-private "
            "(WebhookSettings(allow_private=True)), for development"
            if allowable
            else "never allowed, even with --allow-private"
        )
        super().__init__("url", f"{url!r} resolves to {address} ({why}); refused: {hint}")


class PayloadTooLarge(InvalidArgument):
    """The encoded message body is larger than ``max_payload_bytes``."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__("payload", f"is {size} bytes encoded, over the cap of {limit} bytes")


class EndpointNotFound(QueratorError, LookupError):
    """No endpoint has this id."""

    def __init__(self, endpoint_id: str) -> None:
        self.endpoint_id = endpoint_id
        super().__init__(f"endpoint {endpoint_id!r} does not exist")


class MessageNotFound(QueratorError, LookupError):
    """No message has this id (never sent, or past its retention)."""

    def __init__(self, message_id: str) -> None:
        self.message_id = message_id
        super().__init__(f"message {message_id!r} does not exist")


class VerificationFailed(QueratorError):
    """:func:`querator.webhooks.verify` refused a webhook: a header missing, a
    timestamp outside the tolerance, or no signature matching the secret."""


class DeliveryNotFound(QueratorError, LookupError):
    """No failed (dead-lettered) delivery has this id."""

    def __init__(self, delivery_id: str) -> None:
        self.delivery_id = delivery_id
        super().__init__(f"no failed delivery {delivery_id!r}")
