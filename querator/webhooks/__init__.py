"""Webhook delivery: signed, retried, isolated per endpoint, dead-lettered, re-drivable.

```python
from querator import Querator
from querator.webhooks import DeliveryWorker, Webhooks

with Querator("sqlite:///hooks.db") as q:
    hooks = Webhooks(q)
    endpoint = hooks.add_endpoint("https://example.com/hook", event_types=["invoice.*"])
    hooks.send("invoice.paid", {"id": "in_1"}, idempotency_key="in_1/paid")
    DeliveryWorker(q).run()          # or: querator webhooks worker
```

See docs/webhooks.md. Receivers check what they get with :func:`verify`.
"""

from querator.webhooks.api import AsyncWebhooks, Webhooks
from querator.webhooks.endpoints import Endpoint
from querator.webhooks.errors import (
    DeliveryNotFound,
    EndpointNotFound,
    MessageNotFound,
    PayloadTooLarge,
    TargetRefused,
    VerificationFailed,
)
from querator.webhooks.inspection import FailedDelivery
from querator.webhooks.layout import Attempt, Message, Outcome
from querator.webhooks.settings import DEFAULT_SCHEDULE, WebhookSettings
from querator.webhooks.signing import generate_secret, sign, verify
from querator.webhooks.sync_worker import DeliveryWorker
from querator.webhooks.worker import AsyncDeliveryWorker

__all__ = [
    "DEFAULT_SCHEDULE",
    "AsyncDeliveryWorker",
    "AsyncWebhooks",
    "Attempt",
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
