"""Property: whatever is produced is leased exactly once per attempt, fields intact."""

from __future__ import annotations

import itertools
import secrets

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from querator import Item, Leased, Querator, QueueSettings

from .helpers import drain, ids_of

# Any text a user may send: no NUL (PostgreSQL text cannot hold it) and no lone surrogates.
TEXT = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x00"),
    max_size=16,
)
ITEMS = st.builds(
    Item,
    payload=st.binary(max_size=256),
    kind=TEXT,
    encoding=TEXT,
    reference=TEXT,
    headers=st.dictionaries(TEXT, TEXT, max_size=4),
)


def split(values: list[Item], cuts: list[int]) -> list[list[Item]]:
    """``values`` cut at the given positions into non-empty chunks."""
    points = sorted({c for c in cuts if 0 < c < len(values)})
    bounds = [0, *points, len(values)]
    return [values[a:b] for a, b in itertools.pairwise(bounds)]


def assert_intact(leased: Leased, item: Item, attempts: int) -> None:
    assert leased.payload == item.payload
    assert (leased.kind, leased.encoding, leased.reference) == (
        item.kind,
        item.encoding,
        item.reference,
    )
    assert leased.headers == item.headers
    assert leased.attempts == attempts


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    produced=st.lists(ITEMS, min_size=1, max_size=30),
    cuts=st.lists(st.integers(min_value=1, max_value=29), max_size=5),
    lease_size=st.integers(min_value=1, max_value=12),
    data=st.data(),
)
def test_each_item_is_leased_once_per_attempt_with_fields_intact(
    q: Querator,
    produced: list[Item],
    cuts: list[int],
    lease_size: int,
    data: st.DataObject,
) -> None:
    queue = f"prop-{secrets.token_hex(6)}"
    q.create_queue(queue, QueueSettings(lease_timeout=60))
    ids: list[str] = []
    for chunk in split(produced, cuts):
        ids.extend(q.produce(queue, chunk))
    item_of = dict(zip(ids, produced, strict=True))
    retry_mask = data.draw(st.lists(st.booleans(), min_size=len(ids), max_size=len(ids)))
    to_retry = [i for i, again in zip(ids, retry_mask, strict=True) if again]

    first = drain(q, queue, batch_size=lease_size)
    assert ids_of(first) == ids
    for leased in first:
        assert_intact(leased, item_of[leased.id], attempts=1)
    retried = [x for x in first if x.id in to_retry]
    finished = [x for x in first if x.id not in to_retry]
    if retried:
        q.retry(queue, retried)
    if finished:
        q.complete(queue, finished)

    second = drain(q, queue, batch_size=lease_size)
    assert ids_of(second) == to_retry
    for leased in second:
        assert_intact(leased, item_of[leased.id], attempts=2)
    if second:
        q.complete(queue, second)
    assert q.stats(queue).total == 0
    q.delete_queue(queue)
