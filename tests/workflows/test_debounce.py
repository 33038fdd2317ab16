"""Debounced starts: one run per burst, with the last call's arguments."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from querator import Querator
from querator.errors import InvalidArgument
from querator.queue.models import StoredItem
from querator.queue.service import AsyncQueueClient
from querator.workflows import start, start_async
from querator.workflows.debounce import DEBOUNCE_QUEUE, Debounce, start_due
from querator.workflows.keys import RESULTS_QUEUE, meta_key
from querator.workflows.stored import RunMeta

from .conftest import RunWorker
from .flows import Order, charge, checkout, reserve, ship
from .ops_procs import durable_url_for
from .test_ops_cli import ROOT


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


async def _late_opener_and_a_burst(
    aq: AsyncQueueClient, bounce: Debounce, monkeypatch: pytest.MonkeyPatch
) -> list[str]:
    """A caller reads the window as absent; before it writes, another caller
    opens the window and moves it on (two calls: its first slot is free again).
    The run ids the calls got, the late opener's last."""
    real = aq.lookup
    has_read, burst_done = anyio.Event(), anyio.Event()

    async def lookup(queue: str, dedup_keys: Sequence[str]) -> dict[str, StoredItem]:
        try:
            return await real(queue, dedup_keys)  # QueueNotFound before the first window
        finally:
            if queue == DEBOUNCE_QUEUE and not has_read.is_set():
                has_read.set()
                await burst_done.wait()  # the late opener's view is stale from here on

    monkeypatch.setattr(aq, "lookup", lookup)
    ids: list[str] = []

    async def late() -> None:
        handle = await start_async(aq, checkout, Order(id="late", cents=0), debounce=bounce)
        ids.append(handle.run_id)

    async with anyio.create_task_group() as group:
        group.start_soon(late)
        await has_read.wait()
        for n in range(2):
            handle = await start_async(aq, checkout, Order(id=f"on-{n}", cents=n), debounce=bounce)
            ids.insert(0, handle.run_id)
        burst_done.set()
    return ids


def test_a_caller_whose_window_opened_meanwhile_joins_it(
    q: Querator, monkeypatch: pytest.MonkeyPatch
) -> None:
    bounce = Debounce(key="late", delay=30)
    ids = q.call(_late_opener_and_a_burst, q.aio, bounce, monkeypatch)
    assert len(set(ids)) == 1, ids  # the late caller joined the open window
    (window,) = q.list_items(DEBOUNCE_QUEUE)  # and left no window of its own
    assert window.reference == ids[0]


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


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_two_processes_burst_1000_calls_into_one_run(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = durable_url_for(request, tmp_path, store)
    with Querator(url) as q:
        q.create_queue("bootstrap")
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "tests.workflows.debounce_procs", url, name, "500"],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name in ("p", "r")
        ]
        outs = [proc.communicate(timeout=240) for proc in procs]
        assert [proc.returncode for proc in procs] == [0, 0], [err for _, err in outs]
        ids = {run_id for out, _ in outs for run_id in out.split()}
        assert len(ids) == 1  # every call of both processes joined one window
        [run_id] = ids
        assert _start_due(q, time.monotonic() + 60) == 1
        assert q.call(start_due, q.aio, "t-debouncer") == 0
        found = q.lookup(RESULTS_QUEUE, [meta_key(run_id)])
        args = RunMeta.model_validate_json(found[meta_key(run_id)].payload).args
        assert '"p-499"' in args or '"r-499"' in args  # the last call's arguments
