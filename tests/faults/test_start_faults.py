"""Starting while the database is down: a client (and ``querator worker``) that
waits for its store opens as soon as the database accepts connections."""

from __future__ import annotations

import threading
import time

import pytest

from querator import Querator
from querator.errors import Unavailable

from .cluster import Cluster


def test_a_client_waits_for_a_database_that_is_starting(cluster: Cluster, fault_url: str) -> None:
    cluster.stop()
    started = threading.Timer(3.0, cluster.start)  # the database comes up in 3 s
    began = time.monotonic()
    started.start()
    try:
        with Querator(fault_url, wait_for_store=60) as q:
            waited = time.monotonic() - began
            assert q.list_queues() == []
    finally:
        started.join()
    print(f"opened {waited:.1f}s after start-up began (database down for 3 s)")
    assert 3.0 <= waited < 3.0 + 10.0


def test_without_waiting_an_unreachable_database_fails_at_once(
    cluster: Cluster, fault_url: str
) -> None:
    cluster.stop()
    began = time.monotonic()
    with pytest.raises(Unavailable), Querator(fault_url):
        pass
    assert time.monotonic() - began < 5.0
