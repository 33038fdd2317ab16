"""Pausing a queue: its items are not leased (a lease waits as if it were
empty) while produce still adds them; resuming wakes the leases that wait, in
this client and in every other client of the store (as any change of a
queue's entry reaches every client that listens for wakeups)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from polling import wait_for

from querator import Item, Querator
from querator.errors import QueueNotFound, RequestTimeout
from querator.queue.models import Leased

from .conftest import HTTP_BACKENDS
from .helpers import commit, make_queue


@contextmanager
def other_client(backend_name: str, backend_url: str, q: Querator) -> Iterator[Querator]:
    """Another client of the store under test (the same one on memory, the
    store's only client)."""
    if backend_name == "memory":
        yield q
        return
    with Querator(backend_url) as other:
        yield other


def test_a_paused_queue_leases_nothing_but_takes_produces_until_resumed(
    q: Querator, qname: str
) -> None:
    make_queue(q, qname)
    q.produce(qname, [Item(payload=b"before")])
    assert q.pause_queue(qname).paused is True
    assert q.pause_queue(qname).paused is True  # pausing again changes nothing
    with pytest.raises(RequestTimeout):
        q.lease(qname, client_id="w")
    with pytest.raises(RequestTimeout):
        q.lease(qname, client_id="w", timeout=0.2)  # waits as if empty
    q.produce(qname, [Item(payload=b"while paused")])
    assert sum(p.total for p in q.stats(qname).partitions) == 2

    assert q.resume_queue(qname).paused is False
    leased = q.lease(qname, client_id="w", batch_size=2, timeout=5)
    assert sorted(item.payload for item in leased) == [b"before", b"while paused"]


def test_held_leases_of_a_paused_queue_stay_held_and_complete(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    q.produce(qname, [Item(payload=b"a")])
    held = q.lease(qname, client_id="w", timeout=5)
    q.pause_queue(qname)
    q.complete(qname, held)
    assert sum(p.total for p in q.stats(qname).partitions) == 0


def test_a_lease_waiting_on_a_paused_queue_gets_its_items_when_another_client_resumes(
    q: Querator, qname: str, backend_name: str, backend_url: str
) -> None:
    make_queue(q, qname)
    q.pause_queue(qname)
    q.produce(qname, [Item(payload=b"held back")])
    got: list[Leased] = []
    waiter = threading.Thread(
        target=lambda: got.extend(q.lease(qname, client_id="w", timeout=20)), daemon=True
    )
    waiter.start()
    with other_client(backend_name, backend_url, q) as other:
        other.resume_queue(qname)
    waiter.join(timeout=20)  # a missed wakeup would leave it waiting its whole wait cap
    assert [item.payload for item in got] == [b"held back"]


@pytest.fixture
def caching_client(
    q: Querator, qname: str, backend_name: str, backend_url: str
) -> Iterator[Querator]:
    """Another client of the store that keeps queue info for an hour (so only a
    wakeup can tell it of a change), with ``qname`` made."""
    if backend_name == "memory" or backend_name in HTTP_BACKENDS:
        pytest.skip("one client (memory), or the library client is the server's (http)")
    make_queue(q, qname)
    with Querator(backend_url, cache_ttl=3600) as client:
        yield client


def test_a_pause_by_another_client_reaches_a_client_that_cached_the_queue(
    q: Querator, qname: str, caching_client: Querator
) -> None:
    """Not by its cache expiring: the worker keeps queue info for an hour here."""
    worker = caching_client
    q.produce(qname, [Item(payload=b"first")])
    worker.lease(qname, client_id="w", timeout=5)  # cached, and listening from now on
    q.pause_queue(qname)
    wait_for(lambda: worker.call(worker.aio.queue_info, qname).paused, timeout=10)
    q.produce(qname, [Item(payload=b"second")])
    with pytest.raises(RequestTimeout):
        worker.lease(qname, client_id="w", timeout=0.2)
    q.resume_queue(qname)
    [item] = worker.lease(qname, client_id="w", timeout=10)
    assert item.payload == b"second"


def test_an_update_by_another_client_reaches_a_listening_client_that_cached_the_queue(
    q: Querator, qname: str, caching_client: Querator
) -> None:
    """Not by its cache expiring (an hour here): the update wakes it."""
    worker = caching_client
    with pytest.raises(RequestTimeout):  # cached, and listening from now on
        worker.lease(qname, client_id="w", timeout=0.5)
    settings = q.get_queue(qname).settings.model_copy(update={"lease_timeout": 77.0})
    q.update_queue(qname, settings)

    def updated() -> bool:
        return worker.call(worker.aio.queue_info, qname).settings.lease_timeout == 77.0

    wait_for(updated, timeout=10)


def test_pausing_a_missing_queue_is_queue_not_found(q: Querator, qname: str) -> None:
    with pytest.raises(QueueNotFound):
        q.pause_queue(f"{qname}-missing")
    with pytest.raises(QueueNotFound):
        q.resume_queue(f"{qname}-missing")


def test_items_produced_leased_into_a_paused_queue_wait_unleased(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    q.pause_queue(qname)
    result = commit(
        q,
        produce={qname: [Item(payload=b"plain")]},
        produce_leased={qname: [Item(payload=b"a"), Item(payload=b"b")]},
        client_id="me",
    )
    assert result.leased[qname] == [None, None]
    assert len(result.produced[qname]) == 1
    assert q.stats(qname).total == 3 and q.stats(qname).leased == 0
    q.resume_queue(qname)
    leased = q.lease(qname, client_id="w", batch_size=3, timeout=5)
    assert sorted(item.payload for item in leased) == [b"a", b"b", b"plain"]
