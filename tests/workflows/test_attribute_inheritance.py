"""Which runs start with another's search attributes: a child holds none of its
parent's unless given some (``with_options(attributes=...)``); a
``continue_as_new`` successor holds those its run held when it continued."""

from __future__ import annotations

import pytest

from querator import Querator
from querator.errors import InvalidArgument
from querator.workflows import (
    RunInfo,
    check_replay,
    continue_as_new,
    gather,
    get_run,
    list_runs,
    set_attributes,
    start,
    workflow,
)
from querator.workflows.keys import child_run_id

from .conftest import RunWorker


@workflow(name="t.inherit.child")
def child(n: int) -> int:
    return n * 10


@workflow(name="t.inherit.parent")
def parent(n: int) -> list[int]:
    set_attributes({"stage": "children"})
    plain = child(n)  # position 1
    given = child.with_options(attributes={"customer": "acme", "role": "child"})
    spawned = given.spawn(n + 1)  # position 2
    abandoned = child.with_options(parent_close_policy="abandon").spawn(n + 2)  # position 3
    return [plain, *gather([spawned, abandoned])]


@workflow(name="t.inherit.loop")
def loop(n: int) -> int:
    set_attributes({"round": n})
    if n < 2:
        continue_as_new(n + 1)
    return n


def _ids(runs: list[RunInfo]) -> list[str]:
    return [r.run_id for r in runs]


def test_a_child_holds_only_the_attributes_it_is_given(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([parent, child]):
        run = start(q, parent, 1, attributes={"customer": "acme"})
        assert run.result(timeout=30) == [10, 20, 30]
    plain, given, abandoned = (child_run_id(run.run_id, position) for position in (1, 2, 3))
    assert get_run(q, run.run_id).attributes == {"customer": "acme", "stage": "children"}
    assert get_run(q, plain).attributes == {}
    assert get_run(q, given).attributes == {"customer": "acme", "role": "child"}
    assert get_run(q, abandoned).attributes == {}  # another option leaves attributes alone
    assert _ids(list_runs(q, attributes={"customer": "acme"})) == [given, run.run_id]
    assert _ids(list_runs(q, attributes={"role": "child"})) == [given]
    assert list_runs(q, attributes={"stage": "children", "role": "child"}) == []
    assert check_replay(q, run.run_id, [parent, child]).ok


@pytest.mark.parametrize("bad", [{"no way": 1}, {"k": 1.5}, ["customer"]])
def test_bad_child_attributes_are_refused_when_the_options_are_made(bad: object) -> None:
    with pytest.raises(InvalidArgument) as caught:
        child.with_options(attributes=bad)  # type: ignore[arg-type]
    assert caught.value.field.startswith("attributes")


def test_a_successor_holds_the_attributes_its_run_held(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([loop]):
        first = start(q, loop, 0, attributes={"customer": "acme"})
        assert first.result(timeout=30) == 2
    chain = [first.run_id]
    while (after := get_run(q, chain[-1]).continued_as) is not None:
        chain.append(after)
    assert len(chain) == 3
    assert [get_run(q, r).attributes for r in chain] == [
        {"customer": "acme", "round": n} for n in range(3)
    ]
    assert _ids(list_runs(q, attributes={"customer": "acme"})) == chain[::-1]
    # each successor started with its run's round, then set its own: listed by that
    for n, run_id in enumerate(chain):
        assert _ids(list_runs(q, attributes={"round": n})) == [run_id]
