"""Leases filtered by kind: only items of the kinds asked for are taken; the others
keep their place, attempts and version for the clients that take them."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from querator import Item, Leased, Querator
from querator.errors import InvalidArgument, RequestTimeout

from .helpers import SETTLE, ids_of, make_queue


def _produce(q: Querator, queue: str, *kinds: str) -> list[str]:
    return q.produce(queue, [Item(payload=kind.encode(), kind=kind) for kind in kinds])


def test_a_lease_with_kinds_takes_only_those_kinds_in_order(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    ids = _produce(q, qname, "a", "b", "c", "b", "a")

    got = q.lease(qname, client_id="c1", batch_size=10, kinds=["a", "c"])

    assert sorted(ids_of(got)) == sorted([ids[0], ids[2], ids[4]])
    assert {item.kind for item in got} == {"a", "c"}
    with pytest.raises(RequestTimeout):
        q.lease(qname, client_id="c1", batch_size=10, kinds=["a", "c"])
    untouched = {item.id: item for item in q.list_items(qname) if item.kind == "b"}
    assert set(untouched) == {ids[1], ids[3]}
    assert all(item.attempts == 0 and item.client_id is None for item in untouched.values())
    rest = q.lease(qname, client_id="c2", batch_size=10)
    assert sorted(ids_of(rest)) == sorted([ids[1], ids[3]])


def test_an_unfiltered_lease_takes_every_kind(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    ids = _produce(q, qname, "a", "", "b")
    assert ids_of(q.lease(qname, client_id="c1", batch_size=10)) == ids


def test_a_waiting_lease_with_kinds_ignores_other_kinds(
    q: Querator, q2: Querator, pool: ThreadPoolExecutor, qname: str
) -> None:
    make_queue(q, qname)
    _produce(q, qname, "other")  # ready, but not wanted: never returned, never leased
    started = threading.Event()

    def wait() -> list[Leased]:
        started.set()
        return q.lease(qname, client_id="waiter", timeout=10, kinds=["mine"])

    waiting = pool.submit(wait)
    assert started.wait(5)
    time.sleep(SETTLE)  # deliberate: let the lease block in its long poll first
    _produce(q2, qname, "other")
    time.sleep(SETTLE)  # deliberate: a wakeup for another kind must not end the wait
    assert not waiting.done()
    (mine,) = _produce(q2, qname, "mine")

    assert ids_of(waiting.result(timeout=10)) == [mine]
    others = [item for item in q.list_items(qname) if item.kind == "other"]
    assert len(others) == 2 and all(item.attempts == 0 for item in others)


def test_a_lease_with_kinds_times_out_when_only_other_kinds_are_ready(
    q: Querator, qname: str
) -> None:
    make_queue(q, qname)
    _produce(q, qname, "other")
    with pytest.raises(RequestTimeout):
        q.lease(qname, client_id="c1", timeout=0.3, kinds=["mine"])


@pytest.mark.parametrize(
    ("kinds", "field"),
    [([], "kinds"), ("abc", "kinds"), (["ok", "x" * 513], "kinds[1]"), ([3], "kinds[0]")],
)
def test_bad_kinds_are_refused(q: Querator, qname: str, kinds: object, field: str) -> None:
    make_queue(q, qname)
    with pytest.raises(InvalidArgument) as caught:
        q.lease(qname, client_id="c1", kinds=kinds)  # type: ignore[arg-type]
    assert caught.value.field == field
