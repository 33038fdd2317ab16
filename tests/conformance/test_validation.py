"""Bad input fails with InvalidArgument (before anything reaches the store)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from querator import Item, Querator, QueueSettings, Ref
from querator.errors import InvalidArgument, QueratorError

from .helpers import items, lease_one, make_queue

BAD_NAMES = [
    "",
    "has space",
    "slash/name",
    "semi;colon",
    "quote'name",
    'double"quote',
    "x" * 513,
    "caf\u00e9",
    "tab\tname",
    "new\nline",
]
GOOD_NAMES = ["a", "A-z_0.9", "x" * 512, "..", "-leading-dash"]
MAX_DURATION = 366 * 86_400


def raises_invalid(call: Callable[[], Any]) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as err:
        call()
    assert isinstance(err.value, QueratorError)
    assert isinstance(err.value, ValueError)
    return err.value


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_bad_queue_names_are_rejected(q: Querator, name: str) -> None:
    raises_invalid(lambda: q.create_queue(name))
    raises_invalid(lambda: q.get_queue(name))
    raises_invalid(lambda: q.produce(name, [Item(payload=b"x")]))
    raises_invalid(lambda: q.lease(name, client_id="c1"))
    raises_invalid(lambda: q.stats(name))
    raises_invalid(lambda: q.delete_queue(name))


def test_good_queue_names_are_accepted(q: Querator) -> None:
    for name in GOOD_NAMES:
        assert q.create_queue(name).name == name
    assert sorted(i.name for i in q.list_queues(limit=100)) == sorted(GOOD_NAMES)


@pytest.mark.parametrize("client_id", BAD_NAMES, ids=repr)
def test_bad_client_ids_are_rejected(q: Querator, qname: str, client_id: str) -> None:
    make_queue(q, qname)
    q.produce(qname, items(b"x"))
    raises_invalid(lambda: q.lease(qname, client_id=client_id))
    assert lease_one(q, qname).payload == b"x"  # nothing was leased by the bad call


def test_bad_dead_queue_name_is_rejected() -> None:
    raises_invalid(lambda: QueueSettings(dead_queue="no spaces allowed"))


@pytest.mark.parametrize(
    "settings",
    [
        {"lease_timeout": 0},
        {"lease_timeout": -1},
        {"lease_timeout": MAX_DURATION + 1},
        {"lease_timeout": float("nan")},
        {"lease_timeout": float("inf")},
        {"expire_timeout": 0},
        {"expire_timeout": MAX_DURATION + 1},
        {"lease_timeout": 100, "expire_timeout": 50},
        {"max_attempts": -1},
        {"max_attempts": 65_537},
        {"partitions": 0},
        {"reference": "r" * 2_001},
        {"lease_timout": 5},
    ],
    ids=repr,
)
def test_bad_settings_are_rejected(settings: dict[str, Any]) -> None:
    raises_invalid(lambda: QueueSettings(**settings))


def test_boundary_settings_are_accepted(q: Querator, qname: str) -> None:
    settings = QueueSettings(
        lease_timeout=MAX_DURATION, expire_timeout=MAX_DURATION, max_attempts=65_536
    )
    assert q.create_queue(qname, settings).settings == settings


@pytest.mark.parametrize("count", [0, 1001])
def test_produce_batch_size_limits(q: Querator, qname: str, count: int) -> None:
    make_queue(q, qname)
    raises_invalid(lambda: q.produce(qname, [Item(payload=b"x") for _ in range(count)]))
    assert q.stats(qname).total == 0


@pytest.mark.parametrize("batch_size", [0, -1, 1001])
def test_lease_batch_size_limits(q: Querator, qname: str, batch_size: int) -> None:
    make_queue(q, qname)
    q.produce(qname, items(b"x"))
    raises_invalid(lambda: q.lease(qname, client_id="c1", batch_size=batch_size))
    assert q.stats(qname).leased == 0


@pytest.mark.parametrize("timeout", [-1, float("nan"), float("inf"), MAX_DURATION + 1])
def test_lease_timeout_limits(q: Querator, qname: str, timeout: float) -> None:
    make_queue(q, qname)
    raises_invalid(lambda: q.lease(qname, client_id="c1", timeout=timeout))


@pytest.mark.parametrize("extend", [0, -5, MAX_DURATION + 1, float("nan")])
def test_renew_extend_limits(q: Querator, qname: str, extend: float) -> None:
    make_queue(q, qname, lease_timeout=30)
    q.produce(qname, items(b"x"))
    leased = lease_one(q, qname)
    raises_invalid(lambda: q.renew(qname, [leased], extend=extend))
    q.complete(qname, [leased])  # the version did not change


@pytest.mark.parametrize("version", [2**63, 2**64 + 5, -(2**63) - 1])
def test_a_version_beyond_64_bits_is_the_request_fault(
    q: Querator, qname: str, version: int
) -> None:
    """Not a store failure (retried forever), not a conflict: bad input, before the store."""
    make_queue(q, qname, lease_timeout=30)
    q.produce(qname, items(b"x"))
    leased = lease_one(q, qname)
    for call in (
        lambda: q.complete(qname, [(leased.id, version)]),
        lambda: q.retry(qname, [(leased.id, version)]),
        lambda: q.renew(qname, [(leased.id, version)]),
        lambda: q.transact(complete=[Ref(qname, leased.id, version)]),
    ):
        error = raises_invalid(call)
        assert "version must be below 2^63" in error.rule
    q.complete(qname, [leased])  # nothing changed


def test_empty_and_oversize_item_lists_are_rejected(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    too_many = [(f"1.0.{n}", 1) for n in range(1001)]
    for call in (
        lambda: q.complete(qname, []),
        lambda: q.retry(qname, []),
        lambda: q.renew(qname, []),
        lambda: q.delete_items(qname, []),
        lambda: q.complete(qname, too_many),
    ):
        raises_invalid(call)


def test_naive_datetimes_are_rejected(q: Querator, qname: str) -> None:
    make_queue(q, qname, lease_timeout=30)
    naive = datetime.now() + timedelta(hours=1)  # naive on purpose
    raises_invalid(lambda: q.produce(qname, [Item(payload=b"x", enqueue_at=naive)]))
    assert q.stats(qname).total == 0

    q.produce(qname, items(b"x"))
    leased = lease_one(q, qname)
    raises_invalid(lambda: q.retry(qname, [leased], retry_at=naive))
    q.complete(qname, [leased])


def test_item_fields_are_checked() -> None:
    raises_invalid(lambda: Item(payload=b"x", kind="k" * 513))
    raises_invalid(lambda: Item(payload=b"x", dedup_key=""))
    raises_invalid(lambda: Item(payload=b"x", partition_key=""))
    typo: dict[str, Any] = {"unknown_field": 1}
    raises_invalid(lambda: Item(payload=b"x", **typo))


def test_list_limits_are_checked(q: Querator, qname: str) -> None:
    make_queue(q, qname, partitions=2)
    raises_invalid(lambda: q.list_items(qname, limit=0))
    raises_invalid(lambda: q.list_queues(limit=0))
    raises_invalid(lambda: q.list_items(qname, partition=2))
    raises_invalid(lambda: q.list_items(qname, partition=-1))


def test_settings_are_frozen() -> None:
    settings = QueueSettings()
    with pytest.raises((ValidationError, TypeError, AttributeError)):
        settings.lease_timeout = 5
    assert settings.lease_timeout == 60.0


def test_one_str_or_bytes_where_a_list_is_expected_is_refused(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    [item_id] = q.produce(qname, items(b"x"))
    bad: list[tuple[str, Callable[[], Any]]] = [
        ("items", lambda: q.complete(qname, item_id)),  # type: ignore[arg-type]
        ("items", lambda: q.retry(qname, item_id)),  # type: ignore[arg-type]
        ("items", lambda: q.renew(qname, item_id)),  # type: ignore[arg-type]
        ("items", lambda: q.produce(qname, b"payload")),  # type: ignore[arg-type]
        ("items", lambda: q.produce(qname, "payload")),  # type: ignore[arg-type]
        ("items", lambda: q.produce(qname, Item(payload=b"x"))),  # type: ignore[arg-type]
        ("ids", lambda: q.delete_items(qname, item_id)),
        ("dedup_keys", lambda: q.lookup(qname, "key")),
        ("complete", lambda: q.transact(complete=item_id)),  # type: ignore[arg-type]
        (f"produce[{qname!r}]", lambda: q.transact(produce={qname: "x"})),  # type: ignore[dict-item]
    ]
    for field, call in bad:
        err = raises_invalid(call)
        assert err.field == field, err
        assert "must be a list" in err.rule, err
    assert q.stats(qname).total == 1  # nothing changed


def test_a_payload_is_bytes_or_a_str_stored_as_utf8(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    text, raw = "h\u00e9llo", bytearray(b"raw")
    q.produce(qname, [Item(payload=text), Item(payload=raw)])  # type: ignore[arg-type]
    assert sorted(i.payload for i in q.list_items(qname)) == [b"h\xc3\xa9llo", b"raw"]
    values: list[object] = [{"a": 1}, 5, None, ["x"], "\udc80"]
    for value in values:
        with pytest.raises(InvalidArgument) as err:
            Item(payload=value)  # type: ignore[arg-type]
        assert err.value.field == "payload", err.value
