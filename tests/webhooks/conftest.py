"""Fixtures of the webhook tests: a receiver, short retry schedules, a worker."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from querator import Querator
from querator.webhooks import DeliveryWorker, Webhooks
from webhooks.helpers import FAST
from webhooks.http_receiver import Receiver, serving


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A running receiver on 127.0.0.1."""
    with serving() as running:
        yield running


@pytest.fixture
def hooks(q: Querator) -> Webhooks:
    """Webhooks on the store under test, with the fast schedule."""
    return Webhooks(q, FAST)


@pytest.fixture
def worker(q: Querator) -> Iterator[DeliveryWorker]:
    """A delivery worker on the store under test, running in a thread."""
    running = DeliveryWorker(q, FAST, endpoint_ttl=0.2, shutdown_grace=2.0)
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    yield running
    running.stop()
    thread.join(timeout=20)
    assert not thread.is_alive(), "the delivery worker did not stop"
