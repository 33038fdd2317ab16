"""Messages to a run: send from outside, recv inside the body (every backend)."""

from __future__ import annotations

import contextvars
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from cli_forks import run_cli
from polling import wait_for
from worker_threads import serving

from querator import AsyncQuerator, Querator, QueueSettings
from querator.errors import InvalidArgument, UsageError
from querator.workflows import (
    AsyncWorker,
    RunFinished,
    RunNotFound,
    Worker,
    WorkflowCancelled,
    get_event,
    get_event_async,
    recv,
    recv_async,
    send,
    send_async,
    set_event,
    signal_with_start,
    signal_with_start_async,
    start,
    start_async,
    step,
    workflow,
)
from querator.workflows.engine.context import Recv, RunContext
from querator.workflows.engine.fiber import Fiber, Finished
from querator.workflows.engine.mailbox import message_prefix, recv_record, recv_value
from querator.workflows.keys import (
    RECV_STEP,
    RESULTS_QUEUE,
    RESULTS_SETTINGS,
    meta_key,
    new_run_id,
    step_key,
)
from querator.workflows.stored import StepRecord

from .conftest import RunWorker
from .flows import CALLS, count_call
from .ops_flows import WORK_QUEUE, mailbox
from .ops_procs import durable_url_for, read_log, spawn_worker


@workflow(name="m.inbox")
def inbox(count: int, timeout: float | None) -> list[Any]:
    return [recv("t", timeout=timeout) for _ in range(count)]


@step(name="m.mark")
def mark(key: str) -> str:
    count_call(f"mark:{key}")
    return key


@workflow(name="m.between")
def between(key: str) -> list[Any]:
    first = recv("a")
    mark(key)
    second = recv("b", timeout=30)
    return [first, mark(f"{key}2"), second]


@workflow(name="m.ainbox")
async def ainbox(timeout: float) -> list[Any]:
    return [await recv_async("t", timeout=timeout), await recv_async("u", timeout=timeout)]


def _record(q: Querator, run_id: str, position: int) -> StepRecord | None:
    item = q.lookup(RESULTS_QUEUE, [step_key(run_id, position)]).get(step_key(run_id, position))
    return StepRecord.model_validate_json(item.payload) if item else None


def test_messages_sent_before_recv_are_kept_and_read_in_order(
    q: Querator, run_worker: RunWorker
) -> None:
    run = start(q, inbox, 3, None)
    for value in [{"n": 1}, [2], "three"]:
        send(q, run.run_id, "t", value)
    send(q, run.run_id, "other", "not read: another topic")
    with run_worker([inbox]):
        assert run.result(timeout=20) == [{"n": 1}, [2], "three"]
    record = _record(q, run.run_id, 0)
    assert record is not None and record.step == RECV_STEP


def test_a_waiting_run_is_woken_by_the_send(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([between, mark]):
        run = start(q, between, "w")
        send(q, run.run_id, "a", 1)
        wait_for(lambda: CALLS["mark:w"] == 1, timeout=20, message="first step")
        send(q, run.run_id, "b", {"second": True})
        assert run.result(timeout=20) == [1, "w2", {"second": True}]


def test_recv_times_out_with_none_and_a_late_message_stays(
    q: Querator, run_worker: RunWorker
) -> None:
    with run_worker([inbox]):
        first = start(q, inbox, 2, 0.2)
        assert first.result(timeout=20) == [None, None]
        run = start(q, ainbox, 0.2)
    with run_worker([ainbox]):
        assert run.result(timeout=20) == [None, None]


def test_each_message_read_once_and_a_resend_with_its_key_is_a_no_op(
    q: Querator, run_worker: RunWorker
) -> None:
    run = start(q, inbox, 3, 0.5)
    send(q, run.run_id, "t", "a", idempotency_key="k1")
    send(q, run.run_id, "t", "a", idempotency_key="k1")
    send(q, run.run_id, "t", "b")
    with run_worker([inbox]):
        assert run.result(timeout=20) == ["a", "b", None]
    assert len(q.scan_keys(RESULTS_QUEUE, message_prefix(run.run_id, "t"))) == 2
    # A late resend of a message the run had stays a no-op after the run ended;
    # a new message to the ended run is refused.
    send(q, run.run_id, "t", "a", idempotency_key="k1")
    with pytest.raises(RunFinished):
        send(q, run.run_id, "t", "c", idempotency_key="k2")
    assert len(q.scan_keys(RESULTS_QUEUE, message_prefix(run.run_id, "t"))) == 2


def test_replays_read_the_same_messages_at_the_same_positions(
    q: Querator, run_worker: RunWorker
) -> None:
    # No live bodies: every wake replays the run from its history.
    with run_worker([between, mark], max_live_runs=0):
        run = start(q, between, "r")
        send(q, run.run_id, "b", "B")  # read at the second recv, not the first
        send(q, run.run_id, "a", "A")
        assert run.result(timeout=20) == ["A", "r2", "B"]
    assert CALLS["mark:r"] == 1 and CALLS["mark:r2"] == 1


def test_a_stored_recv_record_is_returned_on_replay_without_parking() -> None:
    records = {0: recv_record("run-x/msg/t/1", '"stored"'), 1: recv_record(None, None)}

    async def body(ctx: RunContext) -> object:
        fiber = Fiber(
            lambda: [ctx.recv("t", 5), ctx.recv("t", 5), ctx.recv("t", None)],
            contextvars.copy_context(),
        )
        message = await fiber.resume()
        await fiber.close()
        return message

    ctx = RunContext("run-x", "wfq", dict(records), workflow="t.wf")
    assert anyio.run(body, ctx) == Recv(2, "t", None)
    done = {**records, 2: recv_record("run-x/msg/t/2", "3")}
    finished = anyio.run(body, RunContext("run-x", "wfq", done, workflow="t.wf"))
    assert isinstance(finished, Finished)


def test_send_refuses_unknown_and_finished_runs(q: Querator, run_worker: RunWorker) -> None:
    with pytest.raises(RunNotFound):
        send(q, "run-nothing", "t", 1)
    with run_worker([inbox]):
        run = start(q, inbox, 0, None)
        assert run.result(timeout=20) == []
    with pytest.raises(RunFinished):
        send(q, run.run_id, "t", 1)
    assert q.scan_keys(RESULTS_QUEUE, message_prefix(run.run_id, "t")) == []


@pytest.mark.parametrize(
    ("field", "args", "options"),
    [
        ("topic", ("", 1), {}),
        ("topic", ("a/b", 1), {}),
        ("topic", ("x" * 201, 1), {}),
        ("value", ("t", math.nan), {}),
        ("value", ("t", object()), {}),
        ("idempotency_key", ("t", 1), {"idempotency_key": ""}),
    ],
)
def test_send_rejects_bad_input_and_writes_nothing(
    q: Querator, field: str, args: tuple[Any, ...], options: dict[str, Any]
) -> None:
    run = start(q, inbox, 1, None)
    with pytest.raises(InvalidArgument) as caught:
        send(q, run.run_id, *args, **options)
    assert caught.value.field == field
    assert q.scan_keys(RESULTS_QUEUE, f"{run.run_id}/msg/") == []


@pytest.mark.parametrize("timeout", [math.nan, -1.0, "1"])
def test_recv_rejects_bad_timeouts(timeout: Any) -> None:
    with pytest.raises(InvalidArgument):
        recv("t", timeout=timeout)


def test_recv_outside_a_workflow_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        recv("t")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m querator.cli ARGS`` from the repository root (a forked process)."""
    return run_cli(*args)


@pytest.fixture(params=["sqlite", "postgres"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store shared by the test and its worker processes."""
    return durable_url_for(request, tmp_path, str(request.param))


def test_a_run_waiting_in_recv_survives_a_sigkilled_worker(
    durable_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "steps.log"
    with Querator(durable_url) as q:
        q.create_queue(
            WORK_QUEUE, QueueSettings(lease_timeout=2.0, expire_timeout=3600.0)
        )  # renewed in time at any load
        run = start(q, mailbox, "k")
        send(q, run.run_id, "m", "one")
        first = spawn_worker(durable_url, "w1", log)
        try:
            # The link's record commits with the park on the second recv.
            wait_for(lambda: _record(q, run.run_id, 1), timeout=30, message="link record")
        finally:
            first.kill()
        sent = cli("runs", "send", run.run_id, "m", '"two"', "--url", durable_url)
        assert sent.returncode == 0, sent.stderr
        second = spawn_worker(durable_url, "w2", log)
        try:
            assert run.result(timeout=30) == ["one", [0], "two"]
        finally:
            assert second.terminate() == 0, second.stderr()
    assert [event[0] for event in read_log(log)] == ["start", "done"]  # the link ran once


def test_runs_send_command_refuses_bad_json_and_unknown_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with Querator(url) as q:
        run = start(q, mailbox, "c")
        for bad in ["NaN", "{oops", ""]:
            refused = cli("runs", "send", run.run_id, "m", bad, "--url", url)
            assert refused.returncode == 2 and "value" in refused.stderr, refused.stderr
        assert q.scan_keys(RESULTS_QUEUE, f"{run.run_id}/msg/") == []
        sent = cli("runs", "send", run.run_id, "m", '{"a": [1, 2]}', "--url", url)
        assert sent.returncode == 0 and "sent on m" in sent.stdout
        [item] = q.scan_keys(RESULTS_QUEUE, f"{run.run_id}/msg/")
        assert json.loads(item.payload) == {"a": [1, 2]}
    unknown = cli("runs", "send", "run-nope", "m", "1", "--url", url)
    assert unknown.returncode == 2


@workflow(name="m.publisher")
def publisher(key: str) -> str:
    set_event("stage", "started")
    mark(key)
    set_event("stage", {"done": 1})
    set_event("url", f"https://pay.example/{key}")
    answer = recv("go")
    set_event("stage", "finished")
    return str(answer)


def test_published_state_latest_value_and_waiting_for_the_first(
    q: Querator, run_worker: RunWorker
) -> None:
    run = start(q, publisher, "p")
    assert get_event(q, run.run_id, "url") is None  # nothing yet, no worker
    with run_worker([publisher, mark]):
        assert get_event(q, run.run_id, "url", timeout=20) == "https://pay.example/p"
        assert get_event(q, run.run_id, "stage") == {"done": 1}
        send(q, run.run_id, "go", "yes")
        assert run.result(timeout=20) == "yes"
    assert get_event(q, run.run_id, "stage") == "finished"
    assert CALLS["mark:p"] == 1
    with pytest.raises(RunNotFound):
        get_event(q, "run-nothing", "stage")
    with pytest.raises(InvalidArgument):
        get_event(q, run.run_id, "bad key")
    with pytest.raises(InvalidArgument):
        get_event(q, run.run_id, "stage", timeout=math.nan)


def test_set_event_outside_a_workflow_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        set_event("k", 1)
    with pytest.raises(InvalidArgument):
        set_event("k", math.inf)


def test_waiting_runs_hold_no_worker_slot(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([inbox], concurrency=1):
        runs = [start(q, inbox, 1, None) for _ in range(4)]
        # Every run waits in recv at once on a worker of one slot; each send wakes one.
        wait_for(
            lambda: all(_wake_done(q, run.run_id) for run in runs),
            timeout=20,
            message="every run parked",
        )
        for n, run in enumerate(runs):
            send(q, run.run_id, "t", n)
        assert [run.result(timeout=20) for run in runs] == [[0], [1], [2], [3]]


def _wake_done(q: Querator, run_id: str) -> bool:
    """The run's start wake was handled (its body reached recv and parked)."""
    key = f"{run_id}/wake/start"
    return not q.lookup("querator.workflows", [key, f"{key}/r"])


def test_cancelling_a_run_waiting_in_recv_ends_it(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([inbox]):
        run = start(q, inbox, 1, None)
        wait_for(lambda: _wake_done(q, run.run_id), timeout=20, message="parked")
        assert run.cancel("no answer")
        with pytest.raises(WorkflowCancelled):
            run.result(timeout=20)
    with pytest.raises(RunFinished):
        send(q, run.run_id, "t", "late")


def test_a_message_after_a_timeout_is_read_by_the_next_recv(
    q: Querator, run_worker: RunWorker
) -> None:
    with run_worker([inbox]):
        run = start(q, inbox, 2, 1.0)
        wait_for(lambda: _record(q, run.run_id, 0), timeout=20, message="first timeout")
        send(q, run.run_id, "t", "kept")
        result = run.result(timeout=20)
    # The send may land before the second recv's timeout (read) or after it (kept, unread).
    assert result[0] is None and result[1] in ("kept", None)
    if result[1] is None:
        assert len(q.scan_keys(RESULTS_QUEUE, message_prefix(run.run_id, "t"))) == 1


@pytest.mark.anyio
async def test_async_twins_send_recv_and_get_event(aq: AsyncQuerator) -> None:
    worker = AsyncWorker(aq, [ainbox, publisher, mark])
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(worker.arun)
        try:
            run = await start_async(aq, ainbox, 20.0)
            await send_async(aq, run.run_id, "u", "second topic")
            await send_async(aq, run.run_id, "t", "first topic")
            published = await start_async(aq, publisher, "async")
            with anyio.fail_after(20):
                assert await run.result() == ["first topic", "second topic"]
                url = await get_event_async(aq, published.run_id, "url", timeout=20)
                assert url == "https://pay.example/async"
                await send_async(aq, published.run_id, "go", None)
                assert await published.result() == "None"
        finally:
            worker.stop()


def test_signal_with_start_puts_the_message_in_with_the_start(
    q: Querator, run_worker: RunWorker
) -> None:
    run = signal_with_start(q, inbox, 1, None, signal=("t", {"early": True}))
    assert len(q.scan_keys(RESULTS_QUEUE, message_prefix(run.run_id, "t"))) == 1
    again = signal_with_start(q, inbox, 2, None, signal=("t", "a"), idempotency_key="sws")
    same = signal_with_start(q, inbox, 2, None, signal=("t", "b"), idempotency_key="sws")
    assert same.run_id == again.run_id  # the existing run: the message is sent to it
    with run_worker([inbox]):
        assert run.result(timeout=20) == [{"early": True}]
        assert again.result(timeout=20) == ["a", "b"]
    with pytest.raises(RunFinished):
        signal_with_start(q, inbox, 2, None, signal=("t", "c"), idempotency_key="sws")


@pytest.mark.parametrize(
    ("field", "signal"),
    [("topic", ("a/b", 1)), ("value", ("t", math.nan)), ("signal", ("t",)), ("signal", "t")],
)
def test_signal_with_start_rejects_bad_input_and_writes_nothing(
    q: Querator, field: str, signal: Any
) -> None:
    q.create_queue(RESULTS_QUEUE, RESULTS_SETTINGS, exist_ok=True)
    with pytest.raises(InvalidArgument) as caught:
        signal_with_start(q, inbox, 1, None, signal=signal, idempotency_key="bad")
    assert caught.value.field == field
    run_id = new_run_id("bad")
    assert q.lookup(RESULTS_QUEUE, [meta_key(run_id)]) == {}


@pytest.mark.anyio
async def test_signal_with_start_async(aq: AsyncQuerator) -> None:
    handle = await signal_with_start_async(aq, inbox, 1, None, signal=("t", 7))
    [item] = await aq.scan_keys(RESULTS_QUEUE, message_prefix(handle.run_id, "t"))
    assert json.loads(item.payload) == 7


def test_a_worker_killed_between_reading_a_message_and_its_next_step(
    durable_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "steps.log"
    with Querator(durable_url) as q:
        q.create_queue(
            WORK_QUEUE, QueueSettings(lease_timeout=2.0, expire_timeout=3600.0)
        )  # renewed in time at any load
        run = start(q, mailbox, "kb")
        send(q, run.run_id, "m", "one")
        first = spawn_worker(durable_url, "w1", log, env={"OPS_WORK_SECONDS": "60"})
        try:
            # The read is stored before the body goes on to the link, which then runs.
            started = ("start", "kb", 0)
            wait_for(lambda: any(e[:3] == started for e in read_log(log)), 30, message="link")
            stored = _record(q, run.run_id, 0)
            assert stored is not None and recv_value(stored)[1] == "one"
        finally:
            first.kill()
        send(q, run.run_id, "m", "two")
        second = spawn_worker(durable_url, "w2", log)
        try:
            assert run.result(timeout=30) == ["one", [0], "two"]
        finally:
            assert second.terminate() == 0, second.stderr()
        record = _record(q, run.run_id, 2)
        assert record is not None and recv_value(record)[1] == "two"  # each message read once


def test_a_sender_killed_while_sending_loses_nothing_and_a_resend_adds_nothing(
    durable_url: str,
) -> None:
    count = 400
    with Querator(durable_url) as q:
        run = start(q, inbox, count, None)
        sender = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).with_name("sender.py")),
                durable_url,
                run.run_id,
                str(count),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert sender.stdout is not None
        for _ in range(20):  # some sends returned; the next one is under way
            sender.stdout.readline()
        sender.kill()
        sender.wait(timeout=30)
        returned = 20 + len(sender.stdout.read().split())
        sender.stdout.close()
        stored = len(q.scan_keys(RESULTS_QUEUE, message_prefix(run.run_id, "t"), limit=1000))
        assert returned <= stored <= returned + 1 < count  # each send all or nothing
        for index in range(count):  # the sender's retry: the keys make repeats no-ops
            send(q, run.run_id, "t", index, idempotency_key=f"s{index}")
        assert len(q.scan_keys(RESULTS_QUEUE, message_prefix(run.run_id, "t"), limit=1000)) == count
        with serving(Worker(q, [inbox], poll_timeout=1.0), join_timeout=15):
            assert run.result(timeout=60) == list(range(count))  # in order, each once
