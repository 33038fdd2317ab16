"""lookup finds the items that hold dedup keys, in any partition."""

from __future__ import annotations

import pytest

from querator import Item, Querator, QueueSettings
from querator.errors import InvalidArgument


def test_lookup_returns_holders_by_key_across_partitions(q: Querator, qname: str) -> None:
    q.create_queue(qname, QueueSettings(partitions=3))
    ids = q.produce(
        qname,
        [
            Item(payload=b"a", dedup_key="k-a"),
            Item(payload=b"b", dedup_key="k-b", partition_key="elsewhere"),
            Item(payload=b"plain"),
        ],
    )
    found = q.lookup(qname, ["k-a", "k-b", "k-none"])
    assert set(found) == {"k-a", "k-b"}
    assert found["k-a"].id == ids[0] and found["k-a"].payload == b"a"
    assert found["k-b"].id == ids[1]


def test_lookup_forgets_completed_items(q: Querator, qname: str) -> None:
    q.create_queue(qname)
    q.produce(qname, [Item(payload=b"x", dedup_key="once")])
    [leased] = q.lease(qname, client_id="c")
    assert q.lookup(qname, ["once"])["once"].version == leased.version
    q.complete(qname, [leased])
    assert q.lookup(qname, ["once"]) == {}


def test_lookup_rejects_bad_keys(q: Querator, qname: str) -> None:
    q.create_queue(qname)
    with pytest.raises(InvalidArgument, match="dedup_keys"):
        q.lookup(qname, [])
    with pytest.raises(InvalidArgument, match=r"dedup_keys\[1\]"):
        q.lookup(qname, ["fine", ""])
