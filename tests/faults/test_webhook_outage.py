"""The delivery worker rides a store outage like the workflow worker: it backs
off (capped) while the store is gone, says so once, and delivers again soon
after the store is back."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from polling import wait_for, wait_until
from webhooks.helpers import FAST
from webhooks.http_receiver import serving

from querator import Querator
from querator.errors import Unavailable
from querator.queue.outage import BACKOFF_CAP
from querator.webhooks import DeliveryWorker, Webhooks

from .cluster import Cluster

pytestmark = pytest.mark.faults

DOWN_FOR = 4.0
"""Seconds the store stays down: several lease attempts fail meanwhile."""


def _lines(caplog: pytest.LogCaptureFixture, *parts: str) -> list[str]:
    """The worker's log lines that contain every one of ``parts``."""
    return [
        message
        for record in caplog.records
        if record.name == "querator.webhooks"
        and all(part in (message := record.getMessage()) for part in parts)
    ]


def _outage_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The worker's lines saying the store is unavailable (its endpoint cache's aside)."""
    return [line for line in _lines(caplog, "store unavailable") if "endpoint refresh" not in line]


def _send(hooks: Webhooks, n: int) -> None:
    """Send message ``n`` once the store answers again."""

    def sent() -> bool:
        try:
            hooks.send("outage.test", {"n": n}, idempotency_key=f"n-{n}")
        except Unavailable:
            return False
        return True

    wait_for(sent, timeout=30, interval=0.1, message="the store to take a message")


def test_the_delivery_worker_rides_a_store_outage(
    cluster: Cluster, fault_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # polling (no notifications): the idle worker asks the store every 0.2 s; a
    # call waits 1 s for a connection (not 30): several leases fail while it is down
    url = f"{fault_url}&pool_timeout=1"
    with serving() as receiver, Querator(url, notifications=False, poll_interval=0.2) as q:
        hooks = Webhooks(q, FAST)
        hooks.add_endpoint(receiver.url("ok"))
        worker = DeliveryWorker(q, FAST, poll_timeout=0.5, endpoint_ttl=0.2, shutdown_grace=2.0)
        thread = threading.Thread(target=worker.run, daemon=True)
        with caplog.at_level(logging.INFO, logger="querator.webhooks"):
            thread.start()
            try:
                _send(hooks, 0)
                wait_for(  # attempted and committed: nothing in flight when the store goes
                    lambda: worker.worker.counts["delivered"] == 1,
                    timeout=10,
                    message="first delivery",
                )
                cluster.stop()
                wait_for(
                    lambda: _outage_lines(caplog),
                    timeout=10,
                    message="the worker to notice the outage",
                )
                wait_until(time.time() + DOWN_FOR)  # several lease attempts fail meanwhile
                cluster.start()
                back = time.monotonic()
                _send(hooks, 1)
                wait_for(
                    lambda: len(receiver.at("ok")) == 2,
                    timeout=BACKOFF_CAP + 10,
                    message="a delivery after the outage",
                )
                print(f"delivered {time.monotonic() - back:.2f}s after the store came back")
            finally:
                worker.stop()
                thread.join(timeout=20)
    assert not thread.is_alive(), "the delivery worker did not stop"
    lost = _outage_lines(caplog)
    assert len(lost) == 1, lost  # once per outage, not once per failed attempt
    assert len(_lines(caplog, "lease from", "reachable again")) == 1, caplog.text
    assert len(_lines(caplog, "endpoint refresh", "store unavailable")) <= 1, caplog.text
    assert not _lines(caplog, "could not refresh endpoints"), caplog.text
