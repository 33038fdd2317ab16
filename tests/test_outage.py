"""Riding through store outages: capped backoff, one log line per outage."""

from __future__ import annotations

import logging

import pytest

from querator.errors import Unavailable
from querator.queue.outage import BACKOFF_CAP, Backoff, Outage


def test_backoff_grows_to_its_cap_with_jitter_and_resets() -> None:
    backoff = Backoff(initial=0.1, cap=1.0)
    delays = [backoff.next() for _ in range(10)]
    assert 0.05 <= delays[0] <= 0.1
    assert all(d <= 1.0 for d in delays) and max(delays[-3:]) > 0.5
    backoff.reset()
    assert backoff.next() <= 0.1
    assert Backoff().cap == BACKOFF_CAP


def test_an_outage_is_logged_once_when_lost_and_once_when_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outage = Outage(logging.getLogger("querator.test"), "consumer")
    with caplog.at_level(logging.WARNING, logger="querator.test"):
        outage.back()  # nothing was lost: nothing to say
        for _ in range(5):
            outage.lost(Unavailable("PostgreSQL: connection refused"))
        assert outage.down
        outage.back()
        outage.back()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert messages[0] == "consumer: store unavailable (PostgreSQL: connection refused); retrying"
    assert messages[1].startswith("consumer: store reachable again after ")
