"""Two workers handle two wakes of one run at the same instant (a timeout and a
send): each reads a different outcome for one ``recv``, and exactly one
outcome holds: the stored one, which both bodies go on with; a message that
lost the race stays for the next ``recv``.

The two workers are two engines on two clients of one SQLite file or
PostgreSQL schema, each driven in its own thread; a gate in ``read_now`` holds
both once they have read, and lets the loser go on only after the winner
stored its outcome (the interleaving that made the two bodies diverge before
the guard)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from polling import wait_for

from querator import Querator
from querator.queue.models import Leased
from querator.queue.service import AsyncQueueClient
from querator.workflows import AsyncWorker, recv, send, start, workflow
from querator.workflows.engine import driver, reading
from querator.workflows.engine.live import LiveRun
from querator.workflows.engine.mailbox import recv_value
from querator.workflows.engine.poison import decode
from querator.workflows.keys import RESULTS_QUEUE, WORKFLOW_QUEUE, step_key
from querator.workflows.stored import StepRecord, WakePayload

from .ops_procs import durable_url_for

TIMEOUT = 1.0
"""The first recv's timeout (seconds)."""


@workflow(name="race.recv")
def raced() -> list[Any]:
    first = recv("t", timeout=TIMEOUT)
    second = recv("u")
    third = recv("t", timeout=0)
    return [first, second, third]


@dataclass
class Gate:
    """Holds the two reads of position 0 until both are made; then the one
    whose outcome is not ``winner`` waits until a record is stored there."""

    winner: str
    stored: Callable[[], bool]
    barrier: threading.Barrier = field(default_factory=lambda: threading.Barrier(2, timeout=30))
    arrived: list[str] = field(default_factory=list)

    def arrive(self, outcome: str) -> None:
        self.arrived.append(outcome)
        self.barrier.wait()
        if outcome != self.winner:
            wait_for(self.stored, timeout=30, message="the winner's record")


GATES: dict[str, Gate] = {}


@pytest.fixture
def gated(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Gate]]:
    """``read_now`` held at position 0 of the runs in ``GATES``."""
    real = reading.read_now

    async def read_now(
        aq: AsyncQueueClient,
        live: LiveRun,
        request: object,
        wake: Leased,
        ahead: reading.Ahead | None = None,
    ) -> tuple[int, StepRecord] | None:
        read = await real(aq, live, request, wake, ahead)
        gate = GATES.get(live.run_id)
        if gate is not None and read is not None and read[0] == 0:
            outcome = "timeout" if recv_value(read[1])[0] is None else "message"
            await anyio.to_thread.run_sync(gate.arrive, outcome)
        return read

    monkeypatch.setattr(driver, "read_now", read_now)
    yield GATES
    GATES.clear()


@pytest.fixture(params=["sqlite", "postgres"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store the test's three clients share."""
    return durable_url_for(request, tmp_path, str(request.param))


class Side:
    """One worker's engine on a client of its own, driven by hand."""

    def __init__(self, url: str, name: str) -> None:
        self.q = Querator(url)
        self.worker = AsyncWorker(self.q.aio, [raced], client_id=name, scheduler=False)

    def lease(self) -> Leased:
        """The next wake of the workflow queue, leased by this side."""

        def one() -> Leased | None:
            got = self.q.lease(WORKFLOW_QUEUE, client_id=self.worker.client_id, timeout=1)
            return got[0] if got else None

        return wait_for(one, timeout=30, message=f"a wake for {self.worker.client_id}")

    def handle(self, wake: Leased) -> None:
        """Advance the run ``wake`` names, here."""
        self.q.call(self.worker.engine.wake, wake, decode(WakePayload, wake))

    def close(self) -> None:
        self.q.call(self.worker.engine.close)
        self.q.close()


def _in_thread(fn: Callable[[], None]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def target() -> None:
        try:
            fn()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, errors


@pytest.mark.parametrize(
    ("winner", "expected"),
    [("message", ["m1", "u1", None]), ("timeout", [None, "u1", "m1"])],
)
def test_a_timeout_and_a_send_racing_give_one_outcome(
    durable_url: str, gated: dict[str, Gate], winner: str, expected: list[Any]
) -> None:
    with Querator(durable_url) as q:
        a, b = Side(durable_url, "a"), Side(durable_url, "b")
        try:
            run = start(q, raced)
            key = step_key(run.run_id, 0)
            a.handle(a.lease())  # the start: parked on recv("t") with its timer
            timer = a.lease()  # due after TIMEOUT
            gate = Gate(winner, lambda: key in q.lookup(RESULTS_QUEUE, [key]))
            gated[run.run_id] = gate
            first, first_errors = _in_thread(lambda: a.handle(timer))
            wait_for(lambda: gate.arrived == ["timeout"], timeout=30, message="a read the timeout")
            send(q, run.run_id, "t", "m1")
            second, second_errors = _in_thread(lambda: b.handle(b.lease()))
            for thread in (first, second):
                thread.join(timeout=60)
                assert not thread.is_alive()
            assert first_errors == [] and second_errors == []
            assert sorted(gate.arrived) == ["message", "timeout"]  # both read, differently
            stored = q.lookup(RESULTS_QUEUE, [key])[key]
            assert recv_value(StepRecord.model_validate_json(stored.payload))[1] == expected[0]
            # The loser's live body goes on: it must hold the stored outcome.
            loser = a if winner == "message" else b
            send(q, run.run_id, "u", "u1")
            loser.handle(loser.lease())
            assert run.result(timeout=30) == expected
        finally:
            a.close()
            b.close()
