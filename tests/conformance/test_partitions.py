"""Partitions: routing by key, even spread without one, draining and waking across all."""

from __future__ import annotations

import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

from querator import Item, Querator, QueueSettings

from .helpers import WAKE_BOUND, drain, ids_of, items, lease_in_background, make_queue


def test_stats_list_every_partition(q: Querator, qname: str) -> None:
    make_queue(q, qname, partitions=4)
    assert [p.partition for p in q.stats(qname).partitions] == [0, 1, 2, 3]
    assert q.get_queue(qname).settings.partitions == 4


def test_same_partition_key_same_partition_in_fifo_order(q: Querator, qname: str) -> None:
    make_queue(q, qname, partitions=4)
    keys = [f"customer-{n}" for n in range(6)]
    batch = [Item(payload=f"{k}:{i}".encode(), partition_key=k) for i in range(5) for k in keys]
    ids = q.produce(qname, batch)
    produced = defaultdict(list)
    for item, item_id in zip(batch, ids, strict=True):
        produced[item.partition_key].append(item_id)

    leased = drain(q, qname, batch_size=7)
    assert sorted(ids_of(leased)) == sorted(ids)
    partitions_of = defaultdict(set)
    order_of = defaultdict(list)
    for got in leased:
        key = got.payload.decode().split(":")[0]
        partitions_of[key].add(got.partition)
        order_of[key].append(got.id)
    for key in keys:
        assert len(partitions_of[key]) == 1, f"{key} spread over {partitions_of[key]}"
        assert order_of[key] == produced[key], f"{key} leased out of produce order"


def test_items_without_key_spread_evenly(q: Querator, qname: str) -> None:
    make_queue(q, qname, partitions=4)
    q.produce(qname, [Item(payload=b"x") for _ in range(400)])
    counts = [p.total for p in q.stats(qname).partitions]
    assert sum(counts) == 400
    assert all(50 <= c <= 150 for c in counts), f"uneven spread over partitions: {counts}"
    for partition in range(4):
        listed = q.list_items(qname, partition=partition, limit=1000)
        assert len(listed) == counts[partition]
        assert {s.partition for s in listed} <= {partition}


def test_one_consumer_drains_every_partition(q: Querator, qname: str) -> None:
    make_queue(q, qname, partitions=4)
    ids = q.produce(qname, [Item(payload=b"x", partition_key=f"k{i}") for i in range(40)])
    leased = drain(q, qname, batch_size=5)
    assert sorted(ids_of(leased)) == sorted(ids)
    assert {x.partition for x in leased} == {0, 1, 2, 3}
    q.complete(qname, leased[:20])
    q.complete(qname, leased[20:])
    assert q.stats(qname).total == 0


def test_produce_into_any_partition_wakes_a_waiting_consumer(
    q: Querator, q2: Querator, pool: ThreadPoolExecutor, qname: str
) -> None:
    make_queue(q, qname, partitions=4)
    seen_partitions = set()
    for n in range(8):
        waiting = lease_in_background(pool, q, qname, "waiter")
        produced_at = time.time()
        (item_id,) = q2.produce(qname, [Item(payload=b"x", partition_key=f"key-{n}")])
        batch, returned_at = waiting.result(timeout=10)
        delay = returned_at - produced_at
        assert ids_of(batch) == [item_id]
        assert delay < WAKE_BOUND, f"woke {delay * 1000:.0f} ms after produce (partition key {n})"
        seen_partitions.add(batch[0].partition)
    assert len(seen_partitions) > 1, "all keys landed in one partition: nothing was tested"


def test_update_queue_grows_partitions(q: Querator, qname: str) -> None:
    make_queue(q, qname, partitions=2)
    before = q.produce(qname, items(b"old-1", b"old-2"))
    info = q.update_queue(qname, QueueSettings(partitions=4))
    assert info.settings.partitions == 4
    assert [p.partition for p in q.stats(qname).partitions] == [0, 1, 2, 3]

    after = q.produce(qname, [Item(payload=b"new") for _ in range(200)])
    counts = [p.total for p in q.stats(qname).partitions]
    assert counts[2] > 0
    assert counts[3] > 0, f"new partitions got nothing: {counts}"
    leased = drain(q, qname, batch_size=50)
    assert sorted(ids_of(leased)) == sorted(before + after)
