"""The workers' progress wakeups (live run pages): sent after runs move, at
most one per interval per worker, on every backend."""

from __future__ import annotations

import time

from querator import Querator
from querator.workflows import start
from querator.workflows.engine.beacon import INTERVAL

from .conftest import RunWorker
from .flows import Order, charge, checkout, reserve, ship


def test_moves_are_coalesced_into_a_wakeup_per_interval(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([checkout, reserve, charge, ship]) as worker:
        began = time.monotonic()
        runs = [start(q, checkout, Order(id=f"b{n}", cents=n)) for n in range(20)]
        for run in runs:
            run.result(timeout=30)
        took = time.monotonic() - began
        sent = worker.worker.beacon.sent
    moves = 20 * 4  # a commit per step and one per run's end, at least
    assert worker.worker.counts["leased"] + worker.worker.counts["handed_over"] >= 20
    assert 1 <= sent <= took / INTERVAL + 2, (sent, took, moves)
