"""Pruning messages: the sweep deletes the messages of runs ended past
MESSAGE_RETENTION (read or not) and never those of a running run (every backend)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from worker_threads import serving

from querator import Querator
from querator.clock import ManualClock
from querator.errors import InvalidArgument
from querator.workflows import (
    RunFinished,
    Worker,
    WorkflowFailed,
    get_run,
    purge_runs,
    recv,
    resume,
    send,
    start,
    workflow,
)
from querator.workflows import retention as retention_module
from querator.workflows.engine.heartbeat import Heartbeat
from querator.workflows.engine.mailbox import mailbox_prefix
from querator.workflows.keys import MAILBOXES_PREFIX, RESULTS_QUEUE, mailbox_mark_key
from querator.workflows.retention import MessageSweep, prune_messages

from .test_messages import cli

START = datetime(2030, 1, 1, tzinfo=UTC)
HOUR = 3600.0


@workflow(name="mr.reader")
def reader() -> Any:
    return recv("t", timeout=HOUR * 1000)


@workflow(name="mr.failer")
def failer() -> Any:
    recv("t")
    raise RuntimeError("failed after reading")


def _messages(q: Querator, run_id: str) -> list[str]:
    return [i.dedup_key or "" for i in q.scan_keys(RESULTS_QUEUE, mailbox_prefix(run_id))]


def _marked(q: Querator, run_id: str) -> bool:
    return mailbox_mark_key(run_id) in q.lookup(RESULTS_QUEUE, [mailbox_mark_key(run_id)])


def _ended_run(q: Querator) -> str:
    """A completed run of mr.reader with a read message, an unread one and a keyed one."""
    run = start(q, reader)
    send(q, run.run_id, "t", "read", idempotency_key="k-read")
    send(q, run.run_id, "other", "never read")
    with serving(Worker(q, [reader], poll_timeout=1.0), join_timeout=15):
        assert run.result(timeout=20) == "read"
    assert len(_messages(q, run.run_id)) == 2 and _marked(q, run.run_id)
    return run.run_id


def test_an_ended_runs_messages_go_after_the_retention_a_running_runs_stay(
    backend_url: str,
) -> None:
    clock = ManualClock(START)
    with Querator(backend_url, clock=clock) as q:
        ended = _ended_run(q)
        running = start(q, reader)  # no worker: it stays running, its messages unread
        send(q, running.run_id, "t", "for the running run")
        sweep = MessageSweep(retention=HOUR)
        assert q.call(sweep.sweep, q.aio) == 0  # ended just now
        clock.advance(HOUR - 1)
        assert q.call(sweep.sweep, q.aio) == 0
        send(q, ended, "t", "read", idempotency_key="k-read")  # within it: a no-op
        assert len(_messages(q, ended)) == 2
        clock.advance(2)
        assert q.call(sweep.sweep, q.aio) == 1
        assert _messages(q, ended) == [] and not _marked(q, ended)
        assert get_run(q, ended).status == "completed"  # the run itself is kept
        assert get_run(q, ended).unread == ()
        # A resend with the key, once pruned, is refused as any send to an
        # ended run: nothing is written either way.
        with pytest.raises(RunFinished):
            send(q, ended, "t", "read", idempotency_key="k-read")
        assert _messages(q, ended) == [] and not _marked(q, ended)
        # The running run, a day later still, keeps its message and reads it.
        clock.advance(24 * HOUR)
        assert q.call(sweep.sweep, q.aio) == 0
        assert len(_messages(q, running.run_id)) == 1
        with serving(Worker(q, [reader], poll_timeout=1.0), join_timeout=15):
            assert running.result(timeout=20) == "for the running run"


def test_a_resumed_run_keeps_its_messages(backend_url: str) -> None:
    clock = ManualClock(START)
    with Querator(backend_url, clock=clock) as q:
        run = start(q, failer)
        send(q, run.run_id, "t", "first")
        send(q, run.run_id, "t", "for the resumed run")
        worker = Worker(q, [failer], poll_timeout=1.0)
        with serving(worker, join_timeout=15), pytest.raises(WorkflowFailed):
            run.result(timeout=20)
        assert resume(q, run.run_id)  # a resume request: running again
        clock.advance(30 * 86_400)
        assert q.call(MessageSweep(retention=HOUR).sweep, q.aio) == 0
        assert len(_messages(q, run.run_id)) == 2


def test_marks_of_purged_runs_go_and_prune_messages_reads_every_mark(q: Querator) -> None:
    ended = _ended_run(q)
    purge_runs(q, before=datetime.now(UTC) + timedelta(days=1))
    assert _messages(q, ended) == [] and _marked(q, ended)  # the purge leaves the mark
    running = start(q, reader)
    send(q, running.run_id, "t", 1)
    assert prune_messages(q, before=datetime.now(UTC) + timedelta(days=1)) == 1
    assert not _marked(q, ended) and _marked(q, running.run_id)
    assert len(_messages(q, running.run_id)) == 1
    with pytest.raises(InvalidArgument, match="before"):
        prune_messages(q, before=datetime(2030, 1, 1))


def test_a_sweep_reads_a_bounded_page_of_marks_and_goes_round(
    backend_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock(START)
    with Querator(backend_url, clock=clock) as q:
        runs = [start(q, reader) for _ in range(3)]
        for run in runs:
            send(q, run.run_id, "u", "never read")
            send(q, run.run_id, "t", "x")
        with serving(Worker(q, [reader], poll_timeout=1.0), join_timeout=15):
            assert [run.result(timeout=20) for run in runs] == ["x"] * 3
        monkeypatch.setattr(retention_module, "MESSAGE_SWEEP_SCAN", 2)
        sweep = MessageSweep(retention=HOUR)
        clock.advance(HOUR + 1)
        assert q.call(sweep.sweep, q.aio) == 2
        assert q.call(sweep.sweep, q.aio) == 1  # the third, past the cursor
        assert q.scan_keys(RESULTS_QUEUE, MAILBOXES_PREFIX) == []
        assert all(_messages(q, run.run_id) == [] for run in runs)
        # the item bound: a sweep stops after the run that passes it
        more = [start(q, reader) for _ in range(2)]
        for run in more:
            send(q, run.run_id, "t", "y")
        with serving(Worker(q, [reader], poll_timeout=1.0), join_timeout=15):
            assert [run.result(timeout=20) for run in more] == ["y"] * 2
        monkeypatch.setattr(retention_module, "MESSAGE_SWEEP_ITEMS", 1)
        clock.advance(HOUR + 1)
        assert q.call(sweep.sweep, q.aio) == 1
        assert q.call(sweep.sweep, q.aio) == 1


def test_the_workers_heartbeat_sweeps_messages(q: Querator) -> None:
    ended = _ended_run(q)
    beat = Heartbeat(q.aio, "mr-test", dict, [])
    beat.messages.retention = 0.0
    q.call(beat._sweep)
    assert _messages(q, ended) == [] and not _marked(q, ended)


def test_runs_prune_messages_on_the_command_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    with Querator(url) as q:
        ended = _ended_run(q)
        kept = cli("runs", "prune-messages", "--before", "1d", "--url", url)
        assert kept.returncode == 0, kept.stderr
        assert "the messages of 0 run(s) pruned" in kept.stdout
        assert len(_messages(q, ended)) == 2
        future = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S")
        done = cli("runs", "prune-messages", "--before", future, "--url", url)
        assert done.returncode == 0, done.stderr
        assert "the messages of 1 run(s) pruned" in done.stdout
        assert _messages(q, ended) == [] and not _marked(q, ended)
        bad = cli("runs", "prune-messages", "--before", "soon", "--url", url)
        assert bad.returncode != 0
