"""Debounced starts: one run per burst, with the last call's arguments."""

from __future__ import annotations

import math
import time

import pytest

from querator import Querator
from querator.errors import InvalidArgument
from querator.workflows import start
from querator.workflows.debounce import DEBOUNCE_QUEUE, Debounce, start_due
from querator.workflows.keys import RESULTS_QUEUE, meta_key
from querator.workflows.stored import RunMeta

from .conftest import RunWorker
from .flows import Order, charge, checkout, reserve, ship


def _start_due(q: Querator, until: float) -> int:
    """Start due windows until one starts or ``until`` passes; how many started."""
    while time.monotonic() < until:
        n = q.call(start_due, q.aio, "t-debouncer")
        if n:
            return n
        time.sleep(0.02)  # polling with a deadline
    return 0


def test_a_burst_starts_one_run_with_the_last_arguments(q: Querator) -> None:
    bounce = Debounce(key="tenant-1", delay=0.5)
    handles = [start(q, checkout, Order(id=f"b-{i}", cents=i), debounce=bounce) for i in range(50)]
    assert len({h.run_id for h in handles}) == 1
    assert q.call(start_due, q.aio, "t-debouncer") == 0  # not due during the burst
    assert _start_due(q, time.monotonic() + 10) == 1
    found = q.lookup(RESULTS_QUEUE, [meta_key(handles[0].run_id)])
    meta = RunMeta.model_validate_json(found[meta_key(handles[0].run_id)].payload)
    assert '"b-49"' in meta.args
    assert q.call(start_due, q.aio, "t-debouncer") == 0
    # the next call opens a new window: another run
    after = start(q, checkout, Order(id="c", cents=1), debounce=bounce)
    assert after.run_id != handles[0].run_id


def test_max_delay_starts_a_never_ending_burst(q: Querator) -> None:
    bounce = Debounce(key="k", delay=0.3, max_delay=0.6)
    until = time.monotonic() + 10
    first = start(q, checkout, Order(id="m", cents=0), debounce=bounce)
    started = 0
    while not started and time.monotonic() < until:
        start(q, checkout, Order(id="m", cents=1), debounce=bounce)
        started = q.call(start_due, q.aio, "t-debouncer")
        time.sleep(0.05)  # a caller that keeps calling, faster than the delay
    assert started == 1
    assert q.lookup(RESULTS_QUEUE, [meta_key(first.run_id)])


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"key": "k", "delay": -1}, "debounce.delay"),
        ({"key": "k", "delay": math.nan}, "debounce.delay"),
        ({"key": "x" * 300, "delay": 1}, "debounce.key"),
        ({"key": "a\nb", "delay": 1}, "debounce.key"),
        ({"key": "", "delay": 1}, "debounce.key"),
        ({"key": "k", "delay": 2, "max_delay": 1}, "debounce.max_delay"),
    ],
)
def test_bad_debounce_is_refused_before_anything_is_written(
    q: Querator, options: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        Debounce(**options)  # type: ignore[arg-type]
    assert caught.value.field == field
    assert DEBOUNCE_QUEUE not in {info.name for info in q.list_queues()}


def test_a_worker_starts_the_debounced_run(q: Querator, run_worker: RunWorker) -> None:
    bounce = Debounce(key="w", delay=0.3)
    handles = [start(q, checkout, Order(id=f"w-{i}", cents=i), debounce=bounce) for i in range(5)]
    assert len({h.run_id for h in handles}) == 1
    with run_worker([checkout, reserve, charge, ship]):
        results = [h.result(timeout=30) for h in handles]
    assert results[0]["charged"] == 4 and all(r == results[0] for r in results)
