"""Text fields keep every character they were given, whichever call stores them;
the one character a store cannot hold (NUL) is refused up front."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from querator import Item, Querator
from querator.errors import InvalidArgument
from querator.queue.models import StoredItem

from .helpers import commit, lease_one, make_queue

# Characters that mean something inside an array literal, and words that do.
AWKWARD = ["a,b", "{x}", '"quoted"', "back\\slash", "NULL", " spaced ", "caf\u00e9 \u2603", ""]


def _item(index: int, text: str) -> Item:
    return Item(
        payload=f"p{index}".encode(),
        kind=text,
        encoding=text,
        reference=text,
        headers={text or "empty": text} if text else {},
        dedup_key=f"{text}#{index}",
    )


def _same_text(stored: StoredItem, sent: Item) -> None:
    fields = ("payload", "kind", "encoding", "reference", "headers", "dedup_key")
    assert {f: getattr(stored, f) for f in fields} == {f: getattr(sent, f) for f in fields}


def test_awkward_text_round_trips_through_produce_and_lease(q: Querator) -> None:
    queue = make_queue(q, "texts")
    sent = [_item(i, text) for i, text in enumerate(AWKWARD)]
    q.produce(queue, sent)
    got = {item.payload: item for item in q.lease(queue, client_id="c1", batch_size=100)}
    assert len(got) == len(sent)
    for item in sent:
        _same_text(got[item.payload], item)
    assert q.lookup(queue, [item.dedup_key or "" for item in sent]).keys() == {
        item.dedup_key for item in sent
    }


def test_awkward_text_round_trips_through_transact(q: Querator) -> None:
    """A step commit's shape: complete one item, produce, produce leased, look up."""
    work = make_queue(q, "work")
    records = make_queue(q, "records")
    q.produce(work, [Item(payload=b"first")])
    first = lease_one(q, work)
    later = datetime.now(UTC) + timedelta(hours=1)
    produced = [_item(i, text) for i, text in enumerate(AWKWARD)]
    scheduled = Item(payload=b"later", kind='x,"y"', dedup_key="later", enqueue_at=later)
    claimed = _item(99, '{"a":[1,2]}')
    keys = [item.dedup_key or "" for item in produced]
    result = commit(
        q,
        complete=[first],
        produce={records: [*produced, scheduled]},
        produce_leased={work: [claimed]},
        client_id="c1",
        lookup={records: keys},
    )
    [leased] = result.leased[work]
    assert leased is not None
    _same_text(leased, claimed)
    found = result.found[records]
    assert found.keys() == set(keys)
    for item in produced:
        _same_text(found[item.dedup_key or ""], item)
    [stored] = q.lookup(records, ["later"]).values()
    assert stored.kind == 'x,"y"'
    assert abs((stored.available_at - later).total_seconds()) < 0.001


@pytest.mark.parametrize(
    "fields",
    [
        {"kind": "a\x00b"},
        {"encoding": "\x00"},
        {"reference": "run\x00"},
        {"dedup_key": "k\x00"},
        {"partition_key": "\x00p"},
        {"headers": {"trace\x00": "v"}},
        {"headers": {"trace": "v\x00"}},
    ],
    ids=repr,
)
def test_nul_in_a_text_field_is_refused(q: Querator, fields: dict[str, object]) -> None:
    queue = make_queue(q, "nul")
    with pytest.raises(InvalidArgument, match="NUL"):
        q.produce(queue, [Item(payload=b"x", **fields)])  # type: ignore[arg-type]
    assert q.stats(queue).total == 0


def test_nul_in_a_lookup_key_is_refused(q: Querator) -> None:
    queue = make_queue(q, "nul-keys")
    with pytest.raises(InvalidArgument, match="NUL"):
        q.lookup(queue, ["k\x00"])
    with pytest.raises(InvalidArgument, match="NUL"):
        commit(q, produce={queue: [Item(payload=b"x")]}, lookup={queue: ["k\x00"]})
    assert q.stats(queue).total == 0
