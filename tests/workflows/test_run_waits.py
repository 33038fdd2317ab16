"""What a waiting run waits for: get_run's ``waits``, ``querator runs show`` and
the HTTP run reply (every backend; the HTTP reply on SQLite)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from http_server import serve
from polling import wait_for
from worker_threads import serving

from querator import Querator
from querator.http import Querator as HttpQuerator
from querator.limits import Concurrency
from querator.workflows import (
    RetryPolicy,
    Worker,
    get_run,
    recv,
    run_detail,
    send,
    sleep,
    start,
    step,
    wait_for_event,
    workflow,
)
from querator.workflows.run_detail import WaitInfo

from .conftest import RunWorker
from .test_messages import cli

RELEASE = threading.Event()


@workflow(name="wt.napper")
def napper() -> None:
    sleep(600)


@workflow(name="wt.asker")
def asker() -> Any:
    return recv("approve", timeout=600)


@workflow(name="wt.reader")
def reader() -> Any:
    first = recv("approve", timeout=600)
    return [first, recv("approve", timeout=600)]


@workflow(name="wt.listener")
def listener(name: str) -> Any:
    return wait_for_event(name)


@workflow(name="wt.parent")
def parent() -> Any:
    return asker()


@step(name="wt.flaky", retry=RetryPolicy(max_attempts=3, initial=600.0, jitter=False))
def flaky() -> None:
    raise RuntimeError("not yet")


@workflow(name="wt.retrying")
def retrying() -> None:
    flaky()


@step(name="wt.held", concurrency=Concurrency(1, name="wt-one"))
def held() -> None:
    RELEASE.wait(30)


@workflow(name="wt.limited")
def limited() -> None:
    held()


def _waits(q: Querator, run_id: str) -> tuple[WaitInfo, ...]:
    return get_run(q, run_id).waits


def _one(q: Querator, run_id: str, kind: str) -> WaitInfo:
    found = wait_for(
        lambda: [w for w in _waits(q, run_id) if w.kind == kind],
        timeout=20,
        message=f"a {kind} wait",
    )
    assert len(found) == 1, found
    return found[0]


def test_a_timer_a_message_and_an_event(q: Querator, run_worker: RunWorker) -> None:
    now = datetime.now(UTC)
    with run_worker([napper, asker, listener]):
        timer = _one(q, start(q, napper).run_id, "timer")
        assert timer.position == 0 and timer.until is not None
        assert timer.until > now + timedelta(seconds=590)
        message = _one(q, start(q, asker).run_id, "message")
        assert (message.name, message.position) == ("approve", 0)
        assert message.since is not None and message.until is not None
        assert abs(message.until - message.since - timedelta(seconds=600)) < timedelta(seconds=5)
        event = _one(q, start(q, listener, "order:7.paid").run_id, "event")
        assert (event.name, event.until) == ("order:7.paid", None)


def test_a_child_run_and_its_own_wait(q: Querator, run_worker: RunWorker) -> None:
    with run_worker([parent, asker]):
        run = start(q, parent)
        child = _one(q, run.run_id, "child")
        assert child.name is not None and child.name.startswith("run-")
        assert _one(q, child.name, "message").name == "approve"


def test_a_step_due_later_and_a_step_parked_for_its_limit(
    q: Querator, run_worker: RunWorker
) -> None:
    RELEASE.clear()
    with run_worker([retrying, limited], concurrency=4):
        retry = _one(q, start(q, retrying).run_id, "step")
        assert retry.name == "wt.flaky" and retry.until is not None
        first, second = start(q, limited), start(q, limited)
        try:
            limits = wait_for(
                lambda: [
                    w for r in (first, second) for w in _waits(q, r.run_id) if w.kind == "limit"
                ],
                timeout=20,
                message="a call parked for its limit",
            )
            assert all(str(w.name).startswith("wt-one") for w in limits), limits
        finally:
            RELEASE.set()
        first.result(timeout=20)
        second.result(timeout=20)
    assert _waits(q, first.run_id) == ()  # ended: waits for nothing


def test_runs_show_and_the_http_reply_say_what_a_run_waits_for(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    with Querator(url) as q, serving(Worker(q, [listener], poll_timeout=1.0), join_timeout=15):
        run = start(q, listener, "shown.here")
        _one(q, run.run_id, "event")
        shown = cli("runs", "show", run.run_id, "--url", url)
        assert shown.returncode == 0, shown.stderr
        assert "waits:    event shown.here at 0 since" in shown.stdout
        with serve(url) as base, HttpQuerator(base) as h:
            [wait] = h.get_run(run.run_id).waits
            assert (wait.kind, wait.name, wait.position) == ("event", "shown.here", 0)
            send(q, run.run_id, "nudge", {"x": 1})
            [unread] = h.get_run(run.run_id).unread
            assert (unread.topic, unread.count) == ("nudge", 1)
        shown = cli("runs", "show", run.run_id, "--url", url)
        assert "unread:   1 message(s) on topic nudge since" in shown.stdout, shown.stdout


@pytest.fixture(autouse=True)
def _released() -> Any:
    yield
    RELEASE.set()


def test_unread_messages_by_topic_with_count_and_oldest(q: Querator, run_worker: RunWorker) -> None:
    run = start(q, reader)
    before = datetime.now(UTC) - timedelta(seconds=1)
    send(q, run.run_id, "approve", "first")
    send(q, run.run_id, "other", 1)
    send(q, run.run_id, "other", 2)
    info = get_run(q, run.run_id)
    assert [(u.topic, u.count) for u in info.unread] == [("approve", 1), ("other", 2)]
    assert all(u.oldest_sent_at >= before for u in info.unread), info.unread
    assert not info.unread_more
    with run_worker([reader]):
        wait_for(
            lambda: [w for w in _waits(q, run.run_id) if w.kind == "message" and w.position == 1],
            timeout=20,
            message="the second recv",
        )
        info = get_run(q, run.run_id)  # the first read: only "other" is unread
        assert [(u.topic, u.count) for u in info.unread] == [("other", 2)]
        send(q, run.run_id, "approve", "second")
        assert run.result(timeout=20) == ["first", "second"]
    finished = get_run(q, run.run_id)  # a finished run's unread messages stay shown
    assert [(u.topic, u.count) for u in finished.unread] == [("other", 2)]


def test_unread_messages_are_counted_within_a_bound(
    q: Querator, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = start(q, reader)
    for n in range(5):
        send(q, run.run_id, f"t{n}", n)
    monkeypatch.setattr(run_detail, "UNREAD_SCAN", 2)
    monkeypatch.setattr(run_detail, "_UNREAD_PAGE", 2)
    info = get_run(q, run.run_id)
    assert [u.topic for u in info.unread] == ["t0", "t1"] and info.unread_more
