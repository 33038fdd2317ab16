"""When the next attempt happens (pure code): the retry schedule, jitter and
``Retry-After``."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from querator.webhooks.settings import WebhookSettings

__all__ = ["next_delay", "parse_retry_after"]


def next_delay(
    settings: WebhookSettings,
    attempt: int,
    retry_after: float | None = None,
    rand: random.Random | None = None,
) -> float | None:
    """Seconds to wait before attempt ``attempt + 1`` after attempt ``attempt``
    (0-based) failed; None when it was the last one (dead-letter it).

    A ``Retry-After`` (seconds, already parsed) replaces the scheduled delay,
    capped at ``settings.max_retry_after``; the scheduled delay gets jitter.
    """
    following = attempt + 1
    if following >= len(settings.schedule):
        return None
    if retry_after is not None:
        return min(max(retry_after, 0.0), settings.max_retry_after)
    base = settings.schedule[following]
    spread = (rand or random).uniform(-settings.jitter, settings.jitter)
    return max(0.0, base * (1.0 + spread))


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """A ``Retry-After`` header as seconds from ``now``: delta-seconds or an
    HTTP date; None when absent or unreadable."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
