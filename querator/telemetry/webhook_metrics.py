"""Webhook delivery attempts as OpenTelemetry instruments: how many, by outcome,
and how long the endpoint took to answer."""

from __future__ import annotations

from typing import Final

from querator.telemetry import meter
from querator.telemetry.queue_metrics import LEASE_BUCKETS

OUTCOME: Final = "outcome"
"""The attribute of an attempt's outcome: ``delivered``, ``retrying`` or ``dead``."""

_meter = meter()

deliveries = _meter.create_counter(
    "querator.webhook.deliveries",
    unit="{attempt}",
    description="Webhook delivery attempts, by outcome (delivered, retrying, dead).",
)
latency = _meter.create_histogram(
    "querator.webhook.delivery.duration",
    unit="s",
    description="Seconds from the start of a delivery attempt to the end of the answer.",
    explicit_bucket_boundaries_advisory=LEASE_BUCKETS,
)


def attempted(outcome: str, seconds: float | None) -> None:
    """Count one attempt's outcome, and its latency when a request was made."""
    deliveries.add(1, {OUTCOME: outcome})
    if seconds is not None:
        latency.record(seconds, {OUTCOME: outcome})
