"""@task on every backend: defer, run by the Worker, retries, Defer, timeouts,
dead letters, kept results, cancellation, bad input."""

from __future__ import annotations

import math
import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from polling import wait_for

from querator import AsyncQuerator, Item, Querator
from querator.errors import InvalidArgument, RequestTimeout
from querator.queue.dead_letters import dead_letters, requeue
from querator.queue.dead_reasons import REASON_HEADER
from querator.tasks import TASK_QUEUE, TaskFailed, task
from querator.tasks.handles import retry_failed
from querator.tasks.layout import task_kind

from . import app_tasks
from .app_tasks import add, anoop, boom, flaky, later, noop, slow
from .conftest import RunWorker


def test_a_deferred_call_runs_once_and_keeps_its_result(q: Querator, run_worker: RunWorker) -> None:
    handle = add.defer(q, 2, b=3)
    assert handle.name == "t.add"
    with run_worker():
        assert handle.result(timeout=20) == 5
    assert app_tasks.RAN == [("add", "2+3")]
    assert q.stats(TASK_QUEUE).partitions[0].total == 0


def test_defer_many_is_one_produce_and_each_call_runs_once(
    q: Querator, run_worker: RunWorker
) -> None:
    handles = noop.defer_many(q, [((f"k{i}",), {}) for i in range(50)])
    assert len({h.id for h in handles}) == 50
    assert sum(p.total for p in q.stats(TASK_QUEUE).partitions) == 50
    with run_worker(concurrency=8):
        wait_for(lambda: len(app_tasks.RAN) >= 50, timeout=30, message="50 tasks ran")
    assert sorted(key for _, key in app_tasks.RAN) == sorted(f"k{i}" for i in range(50))


def test_an_async_task_runs(q: Querator, run_worker: RunWorker) -> None:
    anoop.defer(q, "a")
    with run_worker():
        wait_for(lambda: app_tasks.RAN == [("anoop", "a")], timeout=20)


def test_a_failing_task_is_retried_with_backoff_then_succeeds(
    q: Querator, run_worker: RunWorker
) -> None:
    app_tasks.FAILS_LEFT["x"] = 2
    handle = flaky.defer(q, "x")
    with run_worker():
        assert handle.result(timeout=20) == "done x"
    assert app_tasks.RAN == [("flaky", "x")] * 3


def test_a_task_that_fails_for_good_is_dead_lettered_with_its_traceback(
    q: Querator, run_worker: RunWorker
) -> None:
    handle = boom.defer(q, "y")
    with run_worker(), pytest.raises(TaskFailed) as failed:
        handle.result(timeout=20)
    assert failed.value.error_type == "ValueError"
    assert "bad input y" in failed.value.message
    assert failed.value.traceback is not None and "in boom" in failed.value.traceback
    [letter] = dead_letters(q, TASK_QUEUE)
    assert letter.kind == task_kind("t.boom")
    reason = letter.headers[REASON_HEADER]
    assert reason.startswith("ValueError: bad input y")
    assert "Traceback" in reason and "in boom" in reason
    assert app_tasks.RAN == [("boom", "y")]


def test_a_dead_letter_requeued_runs_again(q: Querator, run_worker: RunWorker) -> None:
    app_tasks.FAILS_LEFT["z"] = 3  # all three attempts fail
    flaky.defer(q, "z")
    with run_worker():
        wait_for(lambda: dead_letters(q, TASK_QUEUE), timeout=20, message="dead letter")
        assert requeue(q, TASK_QUEUE) == 1
        wait_for(lambda: len(app_tasks.RAN) == 4, timeout=20, message="ran again")


def test_a_retried_task_keeps_the_retry_outcome_not_its_failure(
    q: Querator, run_worker: RunWorker
) -> None:
    app_tasks.FAILS_LEFT["w"] = 3  # all three attempts fail; the retry's first succeeds
    handle = flaky.defer(q, "w")
    with run_worker():
        with pytest.raises(TaskFailed):
            handle.result(timeout=20)
        [letter] = dead_letters(q, TASK_QUEUE)
        assert retry_failed(q, TASK_QUEUE, [letter.id]) == 1
        assert handle.result(timeout=20) == "done w"
    assert dead_letters(q, TASK_QUEUE) == []
    assert retry_failed(q, TASK_QUEUE) == 0


def test_defer_runs_the_task_again_later_without_counting_an_attempt(
    q: Querator, run_worker: RunWorker
) -> None:
    handle = later.defer(q, "d")  # retry=1 attempt: a failure would not be retried
    with run_worker():
        assert handle.result(timeout=20) == "later d"
    assert app_tasks.RAN == [("later", "d")] * 2


def test_an_attempt_past_its_timeout_fails(q: Querator, run_worker: RunWorker) -> None:
    handle = slow.defer(q, "s")
    with run_worker(), pytest.raises(TaskFailed) as failed:
        handle.result(timeout=20)
    assert failed.value.error_type == "TaskTimeout"


def test_a_task_not_started_can_be_cancelled(q: Querator, run_worker: RunWorker) -> None:
    kept = noop.defer(q, "kept")
    gone = noop.defer(q, "gone", delay=0.5)
    assert gone.cancel() is True
    assert gone.cancel() is False
    with run_worker():
        wait_for(lambda: app_tasks.RAN == [("noop", "kept")], timeout=20)
        handle = add.defer(q, 1, 1)
        handle.result(timeout=20)
        assert kept.cancel() is False  # done
    assert ("noop", "gone") not in app_tasks.RAN


def test_a_task_deferred_at_an_instant_waits_for_it(q: Querator) -> None:
    at = datetime.now(UTC) + timedelta(hours=1)
    handle = noop.defer(q, "later", at=at)
    [item] = q.list_scheduled(TASK_QUEUE)
    assert item.id == handle.id
    assert abs((item.available_at - at).total_seconds()) < 1


def test_an_idempotency_key_defers_once(q: Querator) -> None:
    first = noop.defer(q, "a", idempotency_key="order-1")
    again = noop.defer(q, "b", idempotency_key="order-1")
    assert (again.id, again.task_id) == (first.id, first.task_id)
    assert sum(p.total for p in q.stats(TASK_QUEUE).partitions) == 1


def test_result_times_out_while_no_worker_runs_it(q: Querator) -> None:
    handle = add.defer(q, 1, 2)
    with pytest.raises(RequestTimeout):
        handle.result(timeout=0.2)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda q: add.defer(q, 1), "task 't.add' arguments"),
        (lambda q: add.defer(q, "x", 2), "task 't.add' argument 'a'"),
        (lambda q: add.defer(q, 1, 2, 3), "task 't.add' arguments"),
        (lambda q: noop.defer(q, "k", delay=-1), "delay"),
        (lambda q: noop.defer(q, "k", delay=1, at=datetime.now(UTC)), "delay"),
        (lambda q: noop.defer(q, "k", at=datetime.now()), "at"),
        (lambda q: noop.defer(q, "k", idempotency_key=""), "idempotency_key"),
        (lambda q: noop.defer_many(q, [("k",)]), "calls[0]"),
        (lambda q: noop.defer_many(q, []), "calls"),
        (lambda q: noop.defer_many(q, [((), {})], urgency=1), "urgency"),
        (lambda q: noop.defer(q, "k", priority=True), "priority"),
        (lambda q: noop.defer(q, "k", connection=object()), "connection"),
    ],
)
def test_bad_input_is_refused_before_anything_is_written(
    q: Querator, call: object, field: str
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        call(q)  # type: ignore[operator]
    assert refused.value.field == field
    assert "querator.tasks" not in [info.name for info in q.list_queues()] or not any(
        p.total for p in q.stats(TASK_QUEUE).partitions
    )


def test_nan_is_refused(q: Querator) -> None:
    @task(name="t.nan")
    def takes(x: float) -> None: ...

    with pytest.raises(InvalidArgument, match="NaN"):
        takes.defer(q, math.nan)


def test_a_parameter_named_like_an_option_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="clashes"):

        @task(name="t.clash")
        def clash(delay: float) -> None: ...


def test_arguments_that_no_longer_fit_are_dead_lettered_saying_why(
    q: Querator, run_worker: RunWorker
) -> None:
    noop.defer(q, "ok")  # creates the queue
    q.produce(TASK_QUEUE, [Item(payload=b'{"other": 1}', kind=task_kind("t.noop"))])
    q.produce(TASK_QUEUE, [Item(payload=b"not json", kind=task_kind("t.noop"))])
    with run_worker():
        wait_for(lambda: len(dead_letters(q, TASK_QUEUE)) == 2, timeout=20, message="2 dead")
    reasons = [d.headers[REASON_HEADER] for d in dead_letters(q, TASK_QUEUE)]
    assert all("t.noop" in reason for reason in reasons), reasons
    assert app_tasks.RAN == [("noop", "ok")]


def test_transactional_defer_is_refused_where_the_store_cannot(
    q: Querator, backend_name: str, tmp_path: Path
) -> None:
    if backend_name != "memory":
        pytest.skip("PostgreSQL and SQLite do it: tests/tasks/test_transactional*.py")
    noop.defer(q, "k")
    with (
        closing(sqlite3.connect(tmp_path / "q.db")) as conn,
        pytest.raises(InvalidArgument, match="needs PostgreSQL or SQLite") as refused,
    ):
        noop.defer(q, "k", connection=conn)
    assert refused.value.field == "connection"
    assert sum(p.total for p in q.stats(TASK_QUEUE).partitions) == 1


@pytest.mark.anyio
async def test_adefer_and_async_handles(aq: AsyncQuerator) -> None:
    handle = await add.defer_async(aq, 4, 5)
    [many] = await noop.defer_many_async(aq, [(("m",), {})])
    assert await many.cancel() is True
    with pytest.raises(RequestTimeout):
        await handle.result(timeout=0.1)


def test_a_task_no_worker_serves_is_reported_as_unserved(q: Querator) -> None:
    from querator.workflows.pollers import unserved_items

    noop.defer(q, "nobody")
    [unserved] = q.call(unserved_items, q.aio, [TASK_QUEUE], grace=0.0)
    assert unserved.kind == task_kind("t.noop")
    assert "task 't.noop'" in unserved.reason


def test_a_worker_stopping_past_its_grace_releases_a_running_task(
    q: Querator, run_worker: RunWorker
) -> None:
    from .app_tasks import astall

    handle = astall.defer(q, "held")
    with run_worker(shutdown_grace=0.1):
        wait_for(lambda: app_tasks.RAN == [("start", "held")], timeout=20)
    # Released, not left to its lease (10 s, renewed while it ran): leasable now.
    [leased] = q.lease(TASK_QUEUE, client_id="next", timeout=2)
    assert (leased.id, leased.attempts) == (handle.id, 2)
