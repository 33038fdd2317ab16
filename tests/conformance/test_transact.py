"""transact(): completes, retries, renews, produces and version checks in one atomic unit."""

from __future__ import annotations

import pytest

from querator import Item, Querator, Ref
from querator.errors import Conflict, ConflictReason, InvalidArgument, QueueNotFound

from .helpers import (
    commit,
    drain,
    ids_of,
    items,
    later,
    lease_one,
    make_queue,
    payloads_of,
    utcnow,
)


def test_complete_and_produce_together(q: Querator, qname: str) -> None:
    src, dst = make_queue(q, f"{qname}-src"), make_queue(q, f"{qname}-dst")
    q.produce(src, items(b"step-1"))
    leased = lease_one(q, src)

    result = q.transact(complete=[leased], produce={dst: items(b"step-2a", b"step-2b")})

    assert q.stats(src).total == 0
    assert list(result.produced) == [dst]
    assert ids_of(q.list_items(dst)) == result.produced[dst]
    assert payloads_of(q.list_items(dst)) == [b"step-2a", b"step-2b"]
    assert result.renewed == []


def test_produce_into_several_queues(q: Querator, qname: str) -> None:
    a, b = make_queue(q, f"{qname}-a"), make_queue(q, f"{qname}-b")
    result = q.transact(produce={a: items(b"1"), b: items(b"2", b"3")})
    assert {k: len(v) for k, v in result.produced.items()} == {a: 1, b: 2}
    assert payloads_of(q.list_items(b)) == [b"2", b"3"]


def test_retry_and_renew_in_one_transaction(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=30)
    q.produce(qname, items(b"a", b"b"))
    a, b = q.lease(qname, client_id="c1", batch_size=2)

    result = q.transact(retry=[a], renew=[b], retry_at=later(3600), extend=90)

    (renewed,) = result.renewed
    assert renewed.id == b.id
    assert renewed.version > b.version
    assert 85 < (renewed.lease_deadline - utcnow()).total_seconds() <= 91
    assert q.stats(qname).scheduled == 1
    assert [s.id for s in q.list_scheduled(qname)] == [a.id]


def test_refs_work_like_leased_items(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    q.produce(qname, items(b"a"))
    leased = lease_one(q, qname)
    q.transact(complete=[Ref(qname, leased.id, leased.version)])
    assert q.stats(qname).total == 0


def test_depends_checks_versions_of_unleased_items(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    out = make_queue(q, f"{qname}-out")
    q.produce(qname, items(b"a"))
    (stored,) = q.list_items(qname)

    q.transact(depends=[Ref(qname, stored.id, stored.version)], produce={out: items(b"ok")})
    assert q.stats(out).total == 1
    assert q.stats(qname).total == 1  # a pure check changes nothing

    with pytest.raises(Conflict) as err:
        q.transact(depends=[Ref(qname, stored.id, stored.version + 1)], produce={out: items(b"no")})
    assert err.value.reasons == {stored.id: ConflictReason.STALE}
    assert q.stats(out).total == 1


def test_failure_changes_nothing_and_names_every_failed_check(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=30)
    out = make_queue(q, f"{qname}-out")
    q.produce(qname, items(b"a", b"b", b"c", b"d"))
    a, b, c = q.lease(qname, client_id="c1", batch_size=3)
    (d,) = [s for s in q.list_items(qname) if s.attempts == 0]
    q.complete(qname, [c])

    with pytest.raises(Conflict) as err:
        q.transact(
            complete=[a, Ref(qname, b.id, b.version + 1)],
            renew=[Ref(qname, d.id, d.version)],
            depends=[Ref(qname, c.id, c.version)],
            produce={out: items(b"never")},
        )
    assert err.value.reasons == {
        b.id: ConflictReason.STALE,
        d.id: ConflictReason.NOT_LEASED,
        c.id: ConflictReason.MISSING,
    }
    assert q.stats(out).total == 0
    assert {s.id for s in q.list_items(qname)} == {a.id, b.id, d.id}
    q.complete(qname, [a, b])  # a and b are still held under their versions


def test_produce_to_unknown_queue_changes_nothing(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    q.produce(qname, items(b"a"))
    leased = lease_one(q, qname)
    with pytest.raises(QueueNotFound):
        q.transact(complete=[leased], produce={f"{qname}-absent": [Item(payload=b"x")]})
    q.complete(qname, [leased])


def test_same_item_twice_is_invalid(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    q.produce(qname, items(b"a"))
    leased = lease_one(q, qname)
    with pytest.raises(InvalidArgument):
        q.transact(complete=[leased], retry=[leased])
    q.complete(qname, [leased])


def test_transacted_produce_is_leasable(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    result = q.transact(produce={qname: items(b"x", b"y")})
    assert ids_of(drain(q, qname)) == result.produced[qname]


def test_completing_an_item_frees_its_dedup_key_for_a_produce_in_the_same_transaction(
    q: Querator, qname: str
) -> None:
    make_queue(q, qname)
    q.produce(qname, items(b"old", dedup_key="k"))
    old = lease_one(q, qname)

    result = q.transact(complete=[old], produce={qname: items(b"new", dedup_key="k")})

    (new_id,) = result.produced[qname]
    assert new_id != old.id
    assert [(s.id, s.payload) for s in q.list_items(qname)] == [(new_id, b"new")]


def test_dedup_hits_inside_a_transaction_return_the_holders_ids(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    out = make_queue(q, f"{qname}-out")
    (held,) = q.produce(out, items(b"first", dedup_key="k1"))
    q.produce(qname, items(b"a"))
    leased = lease_one(q, qname)

    result = q.transact(
        complete=[leased],
        produce={out: [*items(b"x"), *items(b"dup", dedup_key="k1"), *items(b"y", dedup_key="k2")]},
    )

    x, hit, y = result.produced[out]
    assert hit == held
    assert len({x, hit, y}) == 3
    assert payloads_of(q.list_items(out)) == [b"first", b"x", b"y"]


def test_a_stale_complete_in_one_partition_undoes_the_others(q: Querator, qname: str) -> None:
    make_queue(q, qname, partitions=2, lease_timeout=30)
    out = make_queue(q, f"{qname}-out")
    q.produce(qname, [Item(payload=b"x", partition_key=f"k{n}") for n in range(16)])
    held = q.lease(qname, client_id="c1", batch_size=16)
    by_partition = {lease.partition: lease for lease in held}
    fresh, stale = by_partition[0], by_partition[1]
    ref = Ref(qname, stale.id, stale.version + 1)

    with pytest.raises(Conflict) as err:
        q.transact(complete=[fresh, ref], produce={out: items(b"never")})

    assert err.value.reasons == {stale.id: ConflictReason.STALE}
    assert q.stats(out).total == 0
    assert q.stats(qname).total == 16
    q.complete(qname, held)  # both still held under their versions


def test_lookup_answers_after_the_transaction(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    out = make_queue(q, f"{qname}-out")
    (before,) = q.produce(out, items(b"before", dedup_key="a"))
    q.produce(qname, items(b"work", dedup_key="gone"))
    leased = lease_one(q, qname)

    result = commit(
        q,
        complete=[leased],
        produce={out: items(b"new", dedup_key="b")},
        lookup={out: ["a", "b", "c"], qname: ["gone"]},
    )

    assert {key: item.id for key, item in result.found[out].items()} == {
        "a": before,
        "b": result.produced[out][0],
    }
    assert result.found[out]["b"].payload == b"new"
    assert result.found[qname] == {}


def test_lookup_keys_are_validated(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    with pytest.raises(InvalidArgument, match=r"dedup_keys\[1\]"):
        commit(q, produce={qname: items(b"x")}, lookup={qname: ["ok", ""]})
    with pytest.raises(InvalidArgument, match="not one string"):
        commit(q, produce={qname: items(b"x")}, lookup={qname: "key"})
    with pytest.raises(InvalidArgument, match="silent"):
        commit(q, produce={qname: items(b"x")}, silent=qname)
    assert q.stats(qname).total == 0


def test_transact_refuses_options_it_does_not_have(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    with pytest.raises(InvalidArgument, match=r"produce_leased.*not an option of transact"):
        q.transact(produce_leased={qname: items(b"x")}, client_id="me")  # type: ignore[call-arg]
    assert q.stats(qname).partitions[0].total == 0
