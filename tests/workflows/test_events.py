"""Events by name: emit_event from anywhere, wait_for_event in a body (every backend)."""

from __future__ import annotations

import contextvars
import math
from pathlib import Path
from typing import Any

import anyio
import pytest
from polling import wait_for
from worker_threads import serving

from querator import AsyncQuerator, Querator, QueueSettings
from querator.errors import InvalidArgument, UsageError
from querator.workflows import (
    AsyncWorker,
    Worker,
    emit_event,
    emit_event_async,
    start,
    start_async,
    step,
    wait_for_event,
    wait_for_event_async,
    workflow,
)
from querator.workflows.engine.context import RunContext, WaitEvent
from querator.workflows.engine.event_waits import EventRecord, wait_record, wait_value
from querator.workflows.engine.fiber import Fiber, Finished
from querator.workflows.keys import (
    EVENT_RETENTION,
    EVENTS_QUEUE,
    RESULTS_QUEUE,
    event_waiters_prefix,
    named_event_key,
)

from .conftest import RunWorker
from .flows import CALLS, count_call
from .ops_flows import WORK_QUEUE, awaiting
from .ops_procs import durable_url_for, read_log, spawn_worker
from .test_messages import cli


@workflow(name="ev.waiter")
def waiter(name: str, timeout: float | None) -> Any:
    return wait_for_event(name, timeout=timeout)


@step(name="ev.mark")
def mark(key: str) -> str:
    count_call(f"mark:{key}")
    return key


@workflow(name="ev.twice")
def twice(name: str) -> list[Any]:
    first = wait_for_event(name)
    return [first, mark(name), wait_for_event(name, timeout=0)]


@workflow(name="ev.await")
async def awaiter(name: str) -> Any:
    return await wait_for_event_async(name, timeout=30)


def _waiters(q: Querator, name: str) -> int:
    return len(q.scan_keys(RESULTS_QUEUE, event_waiters_prefix(name)))


def test_an_emit_wakes_every_run_waiting_for_its_name(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([waiter], concurrency=1):  # a wait holds no worker slot
        runs = [start(q, waiter, "order:42.paid", None) for _ in range(4)]
        wait_for(lambda: _waiters(q, "order:42.paid") == 4, timeout=20, message="4 waiting")
        assert emit_event(q, "order:42.paid", {"amount": 1999}) is True
        assert [run.result(timeout=20) for run in runs] == [{"amount": 1999}] * 4
    assert _waiters(q, "order:42.paid") == 0  # the emit removed the waiters it woke


def test_a_run_that_waits_after_the_emit_sees_the_first_emit(
    q: Querator, run_worker: RunWorker
) -> None:
    assert emit_event(q, "late.comer", "first") is True
    assert emit_event(q, "late.comer", "second") is False  # the first emit wins
    run = start(q, twice, "late.comer")
    with run_worker([twice, mark]):
        assert run.result(timeout=20) == ["first", "late.comer", "first"]
    assert CALLS["mark:late.comer"] == 1
    assert _waiters(q, "late.comer") == 0


def test_a_wait_times_out_with_none_and_the_name_is_still_emittable(
    q: Querator, run_worker: RunWorker
) -> None:
    with run_worker([waiter, awaiter]):
        assert start(q, waiter, "never", 0.2).result(timeout=20) is None
        assert _waiters(q, "never") == 0  # a timed-out wait leaves no waiter behind
        run = start(q, awaiter, "async.one")
        wait_for(lambda: _waiters(q, "async.one") == 1, timeout=20, message="waiting")
        assert emit_event(q, "async.one", [1, 2]) is True
        assert run.result(timeout=20) == [1, 2]


def test_runs_starting_to_wait_while_the_name_is_emitted_all_see_it(
    q: Querator, run_worker: RunWorker
) -> None:
    # Runs park before, during and after the emit: none misses it (the emit's
    # second look, the waiters' confirming wakes).
    with run_worker([waiter], concurrency=8):
        early = [start(q, waiter, "race", 30.0) for _ in range(10)]
        assert emit_event(q, "race", "go") is True
        late = [start(q, waiter, "race", 30.0) for _ in range(10)]
        assert [run.result(timeout=30) for run in early + late] == ["go"] * 20


def test_a_stored_wait_is_returned_on_replay_without_parking() -> None:
    seen = wait_record("n", EventRecord(value='{"x":1}'))
    records = {0: seen, 1: wait_record("n", None)}

    def run(ctx: RunContext) -> object:
        async def go() -> object:
            fiber = Fiber(
                lambda: [wait_value(ctx.wait_for_event("n", t)) for t in (5, 5, None)],
                contextvars.copy_context(),
            )
            message = await fiber.resume()
            await fiber.close()
            return message

        return anyio.run(go)

    parked = run(RunContext("run-x", "wfq", dict(records), workflow="t.wf"))
    assert parked == WaitEvent(2, "n", None)
    finished = run(RunContext("run-x", "wfq", {**records, 2: seen}, workflow="t.wf"))
    assert isinstance(finished, Finished)
    assert finished.value == [(True, {"x": 1}), (False, None), (True, {"x": 1})]


@pytest.mark.parametrize(
    ("name", "payload", "field"),
    [
        ("", 1, "name"),
        ("a/b", 1, "name"),
        ("tab\there", 1, "name"),
        ("x" * 201, 1, "name"),
        (None, 1, "name"),
        ("ok", math.nan, "payload"),
        ("ok", object(), "payload"),
    ],
)
def test_emit_rejects_bad_input_and_writes_nothing(
    q: Querator, name: Any, payload: Any, field: str
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        emit_event(q, name, payload)
    assert caught.value.field == field
    assert EVENTS_QUEUE not in {info.name for info in q.list_queues()}


@pytest.mark.parametrize(("name", "timeout"), [("", 1), ("ok", -1), ("ok", math.nan)])
def test_wait_for_event_rejects_bad_input(name: str, timeout: float) -> None:
    with pytest.raises(InvalidArgument):
        wait_for_event(name, timeout)


def test_wait_for_event_outside_a_workflow_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        wait_for_event("ok")


def test_an_event_is_kept_for_its_retention_then_the_name_is_new(
    q: Querator, run_worker: RunWorker
) -> None:
    assert EVENT_RETENTION == 7 * 86_400.0
    q.create_queue(EVENTS_QUEUE, QueueSettings(lease_timeout=1.0, expire_timeout=1.0))
    assert emit_event(q, "short", "old") is True
    [kept] = q.list_items(EVENTS_QUEUE)
    # Past the retention no wait sees it; the queue's maintenance deletes it.
    wait_for(lambda: q.stats(EVENTS_QUEUE) and _expired(q), timeout=10, message="expired")
    with run_worker([waiter]):
        assert start(q, waiter, "short", 0.3).result(timeout=20) is None
    q.run_maintenance()
    assert q.lookup(EVENTS_QUEUE, [named_event_key("short")]) == {}
    assert emit_event(q, "short", "new") is True
    assert kept.payload != q.list_items(EVENTS_QUEUE)[0].payload


def _expired(q: Querator) -> bool:
    from datetime import UTC, datetime

    return all(item.expire_at <= datetime.now(UTC) for item in q.list_items(EVENTS_QUEUE))


@pytest.mark.anyio
async def test_async_emit(aq: AsyncQuerator) -> None:
    worker = AsyncWorker(aq, [awaiter])
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(worker.arun)
        try:
            run = await start_async(aq, awaiter, "a.sync")
            assert await emit_event_async(aq, "a.sync", {"ok": True}) is True
            with anyio.fail_after(20):
                assert await run.result() == {"ok": True}
        finally:
            worker.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store shared by the test and its worker processes."""
    return durable_url_for(request, tmp_path, str(request.param))


def test_a_run_waiting_for_an_event_survives_sigkilled_workers(
    durable_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "steps.log"
    with Querator(durable_url) as q:
        q.create_queue(
            WORK_QUEUE, QueueSettings(lease_timeout=2.0, expire_timeout=3600.0)
        )  # renewed in time at any load
        run = start(q, awaiting, "k")
        first = spawn_worker(durable_url, "w1", log)
        try:
            wait_for(lambda: _waiters(q, "k.a") == 1, timeout=30, message="waiting for k.a")
        finally:
            first.kill()  # killed while the run waits
        assert emit_event(q, "k.a", "one") is True  # no worker runs: the wake waits
        second = spawn_worker(durable_url, "w2", log)
        try:
            wait_for(lambda: _waiters(q, "k.b") == 1, timeout=30, message="waiting for k.b")
        finally:
            second.kill()
        third = spawn_worker(durable_url, "w3", log)
        try:
            assert emit_event(q, "k.b", {"two": 2}) is True
            assert run.result(timeout=30) == ["one", [0], {"two": 2}]
        finally:
            assert third.terminate() == 0, third.stderr()
    assert [event[0] for event in read_log(log)] == ["start", "done"]  # the link ran once


def test_events_emit_command(tmp_path: Path, run_worker: RunWorker) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with Querator(url) as q:
        run = start(q, waiter, "cli.done", None)
        for bad, field in [("NaN", "payload"), ("{oops", "payload")]:
            refused = cli("events", "emit", "cli.done", bad, "--url", url)
            assert refused.returncode == 2 and field in refused.stderr, refused.stderr
        refused = cli("events", "emit", "bad/name", "1", "--url", url)
        assert refused.returncode == 2 and "name" in refused.stderr, refused.stderr
        assert EVENTS_QUEUE not in {info.name for info in q.list_queues()}
        emitted = cli("events", "emit", "cli.done", '{"ok": true}', "--url", url)
        assert emitted.returncode == 0 and "emitted" in emitted.stdout, emitted.stderr
        again = cli("events", "emit", "cli.done", "2", "--url", url)
        assert again.returncode == 0 and "already emitted" in again.stdout, again.stderr
        with serving(Worker(q, [waiter], poll_timeout=1.0), join_timeout=15):
            assert run.result(timeout=20) == {"ok": True}
