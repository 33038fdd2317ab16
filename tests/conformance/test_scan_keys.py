"""scan_keys lists items by dedup-key prefix, in key order, across partitions, paged."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from querator import Item, Querator, QueueSettings
from querator.errors import InvalidArgument


def _keys(items: Sequence[object]) -> list[str | None]:
    return [getattr(item, "dedup_key", None) for item in items]


def test_scan_keys_orders_by_key_across_partitions_and_pages(q: Querator, qname: str) -> None:
    q.create_queue(qname, QueueSettings(partitions=3))
    keys = ["r/b/2", "r/a/9", "r/b/10", "r/a/1", "r-x", "r/", "s/a", "r/b/2/x", "q/z"]
    q.produce(qname, [Item(payload=k.encode(), dedup_key=k, partition_key=k) for k in keys])
    q.produce(qname, [Item(payload=b"no key")])
    wanted = sorted(k for k in keys if k.startswith("r/"))
    assert _keys(q.scan_keys(qname, "r/")) == wanted
    first = q.scan_keys(qname, "r/", limit=2)
    assert _keys(first) == wanted[:2]
    rest = q.scan_keys(qname, "r/", after=first[-1].dedup_key, limit=100)
    assert _keys(rest) == wanted[2:]
    assert [i.payload for i in rest] == [k.encode() for k in wanted[2:]]
    assert _keys(q.scan_keys(qname, "r/b/")) == ["r/b/10", "r/b/2", "r/b/2/x"]
    assert _keys(q.scan_keys(qname, "nothing/")) == []
    assert len(q.scan_keys(qname, "")) == len(keys)


def test_scan_keys_compares_code_points_not_locale(q: Querator, qname: str) -> None:
    q.create_queue(qname)
    keys = ["k/B", "k/a", "k/_", "k/-", "k/Z", "k/é", "k/0", "k/.", "k/~"]
    q.produce(qname, [Item(payload=b"", dedup_key=k) for k in keys])
    assert _keys(q.scan_keys(qname, "k/")) == sorted(keys)


def test_scan_keys_forgets_completed_items(q: Querator, qname: str) -> None:
    q.create_queue(qname)
    q.produce(qname, [Item(payload=b"x", dedup_key="p/1"), Item(payload=b"y", dedup_key="p/2")])
    [leased] = q.lease(qname, client_id="c")
    q.complete(qname, [leased])
    assert len(q.scan_keys(qname, "p/")) == 1


def test_scan_keys_rejects_bad_arguments(q: Querator, qname: str) -> None:
    q.create_queue(qname)
    with pytest.raises(InvalidArgument, match="prefix"):
        q.scan_keys(qname, "x" * 513)
    with pytest.raises(InvalidArgument, match="after"):
        q.scan_keys(qname, "p/", after="")
    with pytest.raises(InvalidArgument, match="limit"):
        q.scan_keys(qname, "p/", limit=0)
