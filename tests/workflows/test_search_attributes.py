"""Search attributes: ``start(attributes=...)``, ``set_attributes``, ``list_runs(attributes=...)``
(every backend), the ``--where`` of ``querator runs list`` and the HTTP API."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from querator import Querator
from querator.errors import InvalidArgument, UsageError
from querator.workflows import (
    check_replay,
    fork,
    get_run,
    list_runs,
    purge_runs,
    recv,
    send,
    set_attributes,
    start,
    step,
    workflow,
)
from querator.workflows.attributes import (
    MAX_ATTRIBUTES,
    MAX_TEXT,
    AttributesRecord,
    condition_text,
    merged,
    parse_condition,
)
from querator.workflows.keys import RESULTS_QUEUE

from .conftest import RunWorker


@step(name="t.attrs.bill")
def bill(cents: int) -> int:
    return cents


@workflow(name="t.attrs.order")
def order(cents: int) -> int:
    set_attributes({"stage": "billing"})
    billed = bill(cents)
    set_attributes({"stage": "waiting", "billed": True})
    recv("ship")
    set_attributes({"stage": "shipped"})
    set_attributes({"stage": "shipped"})  # no change: no new generation
    return billed


@workflow(name="t.attrs.crowded")
def crowded(extra: int) -> str:
    set_attributes({f"k{i}": i for i in range(10)})
    try:
        set_attributes({f"more{i}": i for i in range(extra)})
    except InvalidArgument as exc:
        return f"refused: {exc.rule}"
    return "kept"


@workflow(name="t.attrs.idle")
def idle(x: int) -> int:
    return x


def _ids(runs: list[Any]) -> list[str]:
    return [r.run_id for r in runs]


def _entries(q: Querator, run_id: str) -> list[str]:
    """The run's attribute entries and snapshots still stored."""
    index = [
        i.dedup_key or ""
        for prefix in ("index/at/", "index/wa/")
        for i in q.scan_keys(RESULTS_QUEUE, prefix, limit=1000)
        if f"/{run_id}/" in (i.dedup_key or "")
    ]
    own = [i.dedup_key or "" for i in q.scan_keys(RESULTS_QUEUE, f"{run_id}/attrs/", limit=1000)]
    return index + own


def test_runs_are_listed_by_their_start_attributes(q: Querator) -> None:
    acme = start(q, idle, 1, attributes={"customer": "acme", "amount": 1999, "vip": True})
    text = start(q, idle, 2, attributes={"customer": "acme", "amount": "1999"})
    other = start(q, idle, 3, attributes={"customer": "globex", "amount": 1999})
    plain = start(q, idle, 4)
    assert get_run(q, acme.run_id).attributes == {"customer": "acme", "amount": 1999, "vip": True}
    assert get_run(q, plain.run_id).attributes == {}
    assert _ids(list_runs(q, attributes={"customer": "acme"})) == [text.run_id, acme.run_id]
    # an AND of equalities, typed: 1999 is not "1999", True is not 1
    assert _ids(list_runs(q, attributes={"customer": "acme", "amount": 1999})) == [acme.run_id]
    assert _ids(list_runs(q, attributes={"amount": "1999"})) == [text.run_id]
    assert _ids(list_runs(q, attributes={"amount": 1999})) == [other.run_id, acme.run_id]
    assert _ids(list_runs(q, attributes={"vip": True})) == [acme.run_id]
    assert list_runs(q, attributes={"vip": 1}) == []
    assert list_runs(q, attributes={"customer": "initech"}) == []
    # with a workflow, a status, a page cursor and a start time
    assert _ids(list_runs(q, workflow="t.attrs.idle", attributes={"amount": 1999}, limit=1)) == [
        other.run_id
    ]
    assert list_runs(q, workflow="t.attrs.order", attributes={"amount": 1999}) == []
    assert _ids(list_runs(q, status="running", attributes={"customer": "acme"})) == [
        text.run_id,
        acme.run_id,
    ]
    assert list_runs(q, status="completed", attributes={"customer": "acme"}) == []
    first = list_runs(q, attributes={"amount": 1999}, limit=1)
    assert _ids(list_runs(q, attributes={"amount": 1999}, after=first[0].run_id)) == [acme.run_id]
    later = datetime.now(UTC) + timedelta(hours=1)
    assert list_runs(q, attributes={"customer": "acme"}, since=later) == []
    # a string that is not plain text is indexed by a digest, found all the same
    odd = start(q, idle, 5, attributes={"note": "a/b c é"})
    assert _ids(list_runs(q, attributes={"note": "a/b c é"})) == [odd.run_id]
    assert list_runs(q, attributes={"note": "a/b c"}) == []


def test_an_and_lists_the_same_pages_whichever_attribute_is_named_first(q: Querator) -> None:
    runs = [
        start(q, idle, n, attributes={"tier": "gold", **({"customer": "acme"} if n % 4 else {})})
        for n in range(14)
    ]
    start(q, idle, 99, attributes={"customer": "acme"})  # acme, not gold: never listed
    expected = [r.run_id for n, r in reversed(list(enumerate(runs))) if n % 4]
    for wanted in ({"tier": "gold", "customer": "acme"}, {"customer": "acme", "tier": "gold"}):
        listed: list[str] = []
        while page := list_runs(
            q, attributes=wanted, limit=3, after=listed[-1] if listed else None
        ):
            listed += _ids(page)
        assert listed == expected
    rare: dict[str, str | bool] = {"customer": "acme", "tier": "gold", "vip": True}
    assert list_runs(q, attributes=rare) == []


@pytest.mark.parametrize(
    ("attributes", "rule"),
    [
        ({"amount": 19.99}, "must be a str, int or bool"),
        ({"tags": ["a"]}, "must be a str, int or bool"),
        ({"customer": "x" * (MAX_TEXT + 1)}, "at most 256 characters"),
        ({f"k{i}": i for i in range(MAX_ATTRIBUTES + 1)}, "at most 16 keys"),
        ({"bad key": 1}, "must be a letter"),
        ({"": 1}, "must be a letter"),
        ({"big": 2**63}, "64-bit"),
        ("customer=acme", "must be a mapping"),
    ],
)
def test_bad_attributes_are_refused_before_anything_is_written(
    q: Querator, attributes: Any, rule: str
) -> None:
    with pytest.raises(InvalidArgument, match=rule):
        start(q, idle, 1, attributes=attributes)
    with pytest.raises(InvalidArgument, match=rule):
        list_runs(q, attributes=attributes)
    assert list_runs(q, workflow="t.attrs.idle") == []


def test_conditions_and_snapshots_are_pure() -> None:
    assert parse_condition("customer=acme") == ("customer", "acme")
    assert parse_condition("amount=1999") == ("amount", 1999)
    assert parse_condition('amount="1999"') == ("amount", "1999")
    assert parse_condition("vip=true") == ("vip", True)
    assert parse_condition("note=a=b") == ("note", "a=b")
    for value in ("acme", "1999", "true", '"x"', "a=b", 1999, -3, True, False):
        assert parse_condition(condition_text("k", value)) == ("k", value)
    with pytest.raises(InvalidArgument, match="name=value"):
        parse_condition("customer")
    start_ = AttributesRecord(gen=0, values={"a": 1})
    assert merged(start_, {"a": 1}) is None
    after = merged(start_, {"a": True, "b": "x"})
    assert after is not None and after.since == {"a": 1, "b": 1} and after.gen == 1
    full = AttributesRecord(gen=0, values={f"k{i}": i for i in range(MAX_ATTRIBUTES)})
    with pytest.raises(InvalidArgument, match="at most 16 attributes"):
        merged(full, {"one_more": 1})


def test_set_attributes_outside_a_body_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        set_attributes({"stage": "x"})
    with pytest.raises(InvalidArgument):
        set_attributes({"stage": 1.5})  # type: ignore[dict-item]


def test_a_body_changes_its_attributes_and_the_index_follows(
    q: Querator, run_worker: RunWorker
) -> None:
    with run_worker([order, bill]):
        run = start(q, order, 250, attributes={"customer": "acme", "stage": "new"})
        other = start(q, order, 100, attributes={"customer": "globex"})
        for r in (run, other):
            _wait_stage(q, r.run_id, "waiting")
        assert get_run(q, run.run_id).attributes == {
            "customer": "acme",
            "stage": "waiting",
            "billed": True,
        }
        assert list_runs(q, attributes={"stage": "new"}) == []  # a value left
        assert list_runs(q, attributes={"stage": "billing"}) == []
        assert _ids(list_runs(q, attributes={"stage": "waiting", "customer": "acme"})) == [
            run.run_id
        ]
        assert _ids(list_runs(q, attributes={"stage": "waiting"})) == [other.run_id, run.run_id]
        send(q, run.run_id, "ship", 1)
        assert run.result(timeout=20) == 250
    assert _ids(list_runs(q, attributes={"stage": "shipped"})) == [run.run_id]
    assert _ids(list_runs(q, attributes={"stage": "waiting"})) == [other.run_id]
    assert _ids(list_runs(q, status="completed", attributes={"billed": True})) == [run.run_id]
    # the replay check replays the history, set_attributes calls included
    check = check_replay(q, run.run_id, [order, bill])
    assert check.ok, check
    # the stale entries the lister met were deleted: one value per attribute left
    keys = [k for k in _entries(q, run.run_id) if k.startswith("index/at/stage/")]
    assert [k.split("/")[3] for k in keys] == ["s:shipped"]


def _wait_stage(q: Querator, run_id: str, stage: str) -> None:
    from polling import wait_for

    wait_for(
        lambda: get_run(q, run_id).attributes.get("stage") == stage,
        timeout=20,
        message=f"{run_id} at {stage}",
    )


def test_a_purge_removes_attribute_entries_and_snapshots(
    q: Querator, run_worker: RunWorker
) -> None:
    with run_worker([order, bill, idle]):
        run = start(q, order, 5, attributes={"customer": "acme", "stage": "new"})
        plain = start(q, idle, 1, attributes={"customer": "acme"})
        _wait_stage(q, run.run_id, "waiting")
        send(q, run.run_id, "ship", 1)
        run.result(timeout=20)
        plain.result(timeout=20)
    assert _entries(q, run.run_id) and _entries(q, plain.run_id)
    later = datetime.now(UTC) + timedelta(days=1)
    assert purge_runs(q, before=later) == 2
    assert _entries(q, run.run_id) == [] and _entries(q, plain.run_id) == []
    assert list_runs(q, attributes={"customer": "acme"}) == []


def test_a_fork_keeps_the_attributes_its_kept_history_set(
    q: Querator, run_worker: RunWorker
) -> None:
    with run_worker([order, bill]):
        run = start(q, order, 7, attributes={"customer": "acme"})
        _wait_stage(q, run.run_id, "waiting")
        kept = get_run(q, run.run_id).steps  # billing, the bill, waiting: up to the recv
        assert [s.step for s in kept][1:] == ["t.attrs.bill", "querator.set_attributes"]
        copy = fork(q, run.run_id, len(kept))
        _wait_stage(q, copy.run_id, "waiting")
        assert get_run(q, copy.run_id).attributes == get_run(q, run.run_id).attributes
        assert _ids(list_runs(q, attributes={"stage": "waiting", "customer": "acme"})) == [
            copy.run_id,
            run.run_id,
        ]
        for r in (run, copy):
            send(q, r.run_id, "ship", 1)
            assert r.result(timeout=20) == 7
    assert _ids(list_runs(q, attributes={"stage": "shipped", "billed": True})) == [
        copy.run_id,
        run.run_id,
    ]


def test_without_live_bodies_every_move_replays_the_set_attributes_calls(
    q: Querator, run_worker: RunWorker
) -> None:
    """Each move replays the body from its history: a recorded set_attributes
    writes nothing again and the run ends with one entry per value it holds."""
    with run_worker([order, bill], max_live_runs=0):
        run = start(q, order, 3, attributes={"customer": "replayed"})
        _wait_stage(q, run.run_id, "waiting")
        send(q, run.run_id, "ship", 1)
        assert run.result(timeout=20) == 3
    steps = [s.step for s in get_run(q, run.run_id).steps]
    assert steps.count("querator.set_attributes") == 4
    snapshots = q.scan_keys(RESULTS_QUEUE, f"{run.run_id}/attrs/", limit=100)
    assert len(snapshots) == 3  # the fourth call changed nothing
    assert _ids(list_runs(q, attributes={"customer": "replayed", "stage": "shipped"})) == [
        run.run_id
    ]
    assert check_replay(q, run.run_id, [order, bill]).ok


def test_pages_of_a_rare_conjunction_follow_one_another(q: Querator) -> None:
    """An AND whose second attribute is rare reads several scans per page; the
    pages, one after the other, list each matching run once."""
    runs = [
        start(q, idle, n, attributes={"customer": "pager", "gold": n % 7 == 0}) for n in range(40)
    ]
    gold = {r.run_id for n, r in enumerate(runs) if n % 7 == 0}
    seen: list[str] = []
    after = None
    while True:
        page = list_runs(q, attributes={"customer": "pager", "gold": True}, limit=2, after=after)
        if not page:
            break
        seen += _ids(page)
        after = page[-1].run_id
    assert len(seen) == len(set(seen)) and set(seen) == gold  # once each (ties: either order)


def test_a_body_that_would_hold_too_many_attributes_gets_invalid_argument(
    q: Querator, run_worker: RunWorker
) -> None:
    with run_worker([crowded]):
        full = start(q, crowded, 7, attributes={"customer": "many"})
        assert full.result(timeout=20) == "refused: a run holds at most 16 attributes"
        fits = start(q, crowded, 5, attributes={"customer": "fits"})
        assert fits.result(timeout=20) == "kept"
    assert len(get_run(q, full.run_id).attributes) == 11  # the refused call changed nothing
    assert len(get_run(q, fits.run_id).attributes) == 16
    assert check_replay(q, full.run_id, [crowded]).ok
