"""``get_run`` shows what a run is doing now: the step items not ended (with the
step's name and lease), durable timers with their wake time, and a saga's
compensations with their outcomes — on every backend."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cli_forks import run_cli
from polling import wait_for
from worker_threads import serving

from querator import Querator
from querator.workflows import SagaFailed, Worker, saga, sleep, start, step, workflow
from querator.workflows.inspection import RunInfo, get_run

from .conftest import RunWorker

GATES: dict[str, threading.Event] = {}


@step(name="rd.hold")
def hold(key: str) -> str:
    GATES[key].wait(30)
    return key


@workflow(name="rd.holding")
def holding(key: str) -> str:
    return hold(key)


@workflow(name="rd.napping")
def napping(key: str) -> str:
    sleep(3600)
    return key


@step(name="rd.book")
def book(key: str) -> str:
    return f"booked {key}"


@book.compensate
def unbook(key: str, booking: str | None) -> None:
    return None


@step(name="rd.pay", retry=None)
def pay(key: str) -> str:
    raise RuntimeError(f"card of {key} declined")


@saga(name="rd.trip")
def trip(key: str) -> str:
    book(key)
    return pay(key)


def test_a_running_step_is_shown_with_its_name_and_lease(
    q: Querator, run_worker: RunWorker
) -> None:
    GATES["h1"] = threading.Event()
    with run_worker([holding]):
        run = start(q, holding, "h1")

        def running() -> RunInfo | None:
            info = get_run(q, run.run_id)
            return info if info.pending and info.pending[0].leased_until else None

        info = wait_for(running, timeout=20, message="the step runs")
        [pending] = info.pending
        assert (pending.position, pending.step, pending.attempts) == (0, "rd.hold", 1)
        assert pending.leased_until is not None and pending.leased_until > datetime.now(UTC)
        assert not pending.compensation
        GATES["h1"].set()
        assert run.result(timeout=20) == "h1"
    assert get_run(q, run.run_id).pending == ()


def test_a_durable_timer_shows_when_it_ends(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([napping]):
        run = start(q, napping, "n1")
        info = wait_for(lambda: get_run(q, run.run_id).steps or None, timeout=20)
    [timer] = info
    assert timer.step == "querator.sleep" and timer.until is not None
    expected = datetime.now(UTC) + timedelta(seconds=3600)
    assert abs((timer.until - expected).total_seconds()) < 60
    assert get_run(q, run.run_id).status == "running"


def test_a_sagas_compensations_are_shown(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([trip]):
        run = start(q, trip, "t1")
        with pytest.raises(SagaFailed):
            run.result(timeout=20)
    info = get_run(q, run.run_id)
    assert info.status == "compensated"
    [undo] = info.compensations
    assert (undo.position, undo.step, undo.name, undo.outcome) == (
        0,
        "rd.book",
        "rd.book.compensate",
        "completed",
    )
    assert undo.attempts == 1 and undo.finished_at is not None and undo.error is None
    assert get_run(q, (start(q, holding, "never-run")).run_id).compensations == ()


def test_runs_show_prints_timers_running_steps_and_compensations(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'detail.db'}"
    GATES["h2"] = threading.Event()
    with Querator(url) as q, serving(Worker(q, [trip, napping, holding], poll_timeout=1.0)):
        failed, asleep, busy = (
            start(q, trip, "t2"),
            start(q, napping, "n2"),
            start(q, holding, "h2"),
        )
        with pytest.raises(SagaFailed):
            failed.result(timeout=20)
        wait_for(lambda: get_run(q, asleep.run_id).steps, timeout=20, message="asleep")
        wait_for(lambda: get_run(q, busy.run_id).pending, timeout=20, message="busy")
        shows = {run.run_id: _show(url, run.run_id) for run in (failed, asleep, busy)}
        GATES["h2"].set()
    assert "compensations:" in shows[failed.run_id]
    [line] = [ln for ln in shows[failed.run_id].splitlines() if ln.startswith("rd.book@0")]
    assert line.split()[:3] == ["rd.book@0", "rd.book.compensate", "completed"]
    [line] = [ln for ln in shows[asleep.run_id].splitlines() if "querator.sleep" in ln]
    assert "sleeping" in line and "until " in line
    [line] = [ln for ln in shows[busy.run_id].splitlines() if ln.startswith("0 ")]
    assert "rd.hold" in line
    assert "running (lease until" in line


def _show(url: str, run_id: str) -> str:
    done = run_cli("runs", "show", run_id, "--url", url, cwd=Path.cwd())
    assert done.returncode == 0, done.stderr
    return done.stdout
