"""Streams of a run: written by a body and a step, read live from another
process's writes, resumable by offset, ended by a close or the run's end."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from polling import wait_for
from worker_threads import serving

from querator import Querator, QueueSettings
from querator.errors import InvalidArgument, UsageError
from querator.queue.service import AsyncQueueClient
from querator.workflows import (
    RunNotFound,
    Worker,
    read_stream,
    read_stream_async,
    read_stream_page_async,
    send,
    start,
    write_stream,
)
from querator.workflows.keys import RESULTS_QUEUE, stream_prefix

from .conftest import RunWorker
from .ops_procs import durable_url_for, spawn_worker
from .stream_flows import (
    SLOW_WRITER,
    STREAM_QUEUE,
    async_flow,
    atokens,
    mixed,
    progress,
    tokens,
)

WORKER = Path(__file__).with_name("stream_worker.py")


@pytest.fixture(params=["sqlite", "postgres"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store shared by the test and its worker processes."""
    return durable_url_for(request, tmp_path, str(request.param))


class Reader:
    """``read_stream`` in a thread, collecting what it reads."""

    def __init__(self, q: Querator, run_id: str, key: str, offset: int = 0) -> None:
        self.values: list[Any] = []
        self.done = threading.Event()
        self.error: BaseException | None = None
        iterator = read_stream(q, run_id, key, offset)

        def run() -> None:
            try:
                for value in iterator:
                    self.values.append(value)
            except BaseException as exc:
                self.error = exc
            finally:
                self.done.set()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def finish(self, timeout: float = 30.0) -> list[Any]:
        assert self.done.wait(timeout), f"reader still waiting after {self.values}"
        if self.error is not None:
            raise self.error
        return self.values


START, TOKENS = {"stage": "start"}, ["tok0", "tok1", "tok2"]


def test_a_reader_follows_a_worker_process_and_ends_at_the_close(
    durable_url: str, tmp_path: Path
) -> None:
    with Querator(durable_url) as q:
        q.create_queue(STREAM_QUEUE, QueueSettings(lease_timeout=0.5, expire_timeout=3600.0))
        run = start(q, progress, 3, True)
        reader = Reader(q, run.run_id, "out")
        worker = spawn_worker(durable_url, "w1", tmp_path / "log", script=WORKER)
        try:
            # the run waits in recv: the reader has what was written so far and waits
            wait_for(lambda: len(reader.values) == 4, timeout=30, message="values so far")
            assert reader.values == [START, *TOKENS] and not reader.done.is_set()
            send(q, run.run_id, "go", "paid")
            end = {"stage": "end", "got": "paid"}
            assert reader.finish() == [START, *TOKENS, end]  # the write after the close is not
            assert run.result(timeout=30) == "paid"
            # resumable: from an offset, a finished run's stream reads at once
            assert list(read_stream(q, run.run_id, "out", offset=3)) == ["tok2", end]
            assert list(read_stream(q, run.run_id, "out", offset=9)) == []
        finally:
            assert worker.terminate() == 0, worker.stderr()


def test_body_writes_are_not_written_again_by_a_replay_after_sigkill(
    durable_url: str, tmp_path: Path
) -> None:
    with Querator(durable_url) as q:
        q.create_queue(STREAM_QUEUE, QueueSettings(lease_timeout=0.5, expire_timeout=3600.0))
        run = start(q, progress, 2, False)
        first = spawn_worker(durable_url, "w1", tmp_path / "log", script=WORKER)
        try:
            wait_for(
                lambda: len(q.scan_keys(RESULTS_QUEUE, stream_prefix(run.run_id, "out"))) == 3,
                timeout=30,
                message="values before the recv",
            )
        finally:
            first.kill()
        send(q, run.run_id, "go", 1)
        second = spawn_worker(durable_url, "w2", tmp_path / "log", script=WORKER)
        try:
            assert run.result(timeout=30) == 1
        finally:
            assert second.terminate() == 0, second.stderr()
        # not closed: the run's end ends the stream; each value once
        values = list(read_stream(q, run.run_id, "out"))
        assert values == [START, "tok0", "tok1", {"stage": "end", "got": 1}]


def test_async_writes_and_the_long_poll_page(q: Querator, run_worker: RunWorker) -> None:
    run = start(q, async_flow, 2)
    page = q.call(read_stream_page_async, q.aio, run.run_id, "out", 0, 0.0)
    assert page.values == [] and page.next_offset == 0 and not page.ended
    with run_worker([async_flow, atokens]):
        page = q.call(read_stream_page_async, q.aio, run.run_id, "out", 0, 30.0)
        assert page.values and page.values[0] == 0
        assert run.result(timeout=30) == 2
    page = q.call(read_stream_page_async, q.aio, run.run_id, "out", 1, 0.0)
    assert (page.values, page.next_offset, page.ended) == ([1], 2, True)
    assert list(read_stream(q, run.run_id, "side")) == ["body"]

    async def read_async(aq: AsyncQueueClient) -> list[Any]:
        return [value async for value in read_stream_async(aq, run.run_id, "out")]

    assert q.call(read_async, q.aio) == [0, 1]


def test_a_step_write_of_a_retried_attempt_is_a_no_op(q: Querator, run_worker: RunWorker) -> None:
    run = start(q, progress, 2, True)
    with run_worker([progress, tokens]):
        wait_for(
            lambda: len(q.scan_keys(RESULTS_QUEUE, stream_prefix(run.run_id, "out"))) == 3,
            timeout=30,
            message="values before the recv",
        )
        keys = [
            str(i.dedup_key) for i in q.scan_keys(RESULTS_QUEUE, stream_prefix(run.run_id, "out"))
        ]
        send(q, run.run_id, "go", None)
        assert run.result(timeout=30) is None
    assert keys[1].endswith("/000000000") and keys[2].endswith("/000000001")


def test_bad_input_is_refused_before_anything(q: Querator) -> None:
    run = start(q, progress, 1, True)
    for bad in ["", "a b", "x" * 201, "a/b"]:
        with pytest.raises(InvalidArgument, match="key"):
            read_stream(q, run.run_id, bad)
    for offset in [-1, 1.5, True, "0"]:
        with pytest.raises(InvalidArgument, match="offset"):
            read_stream(q, run.run_id, "out", offset)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="timeout"):
        q.call(read_stream_page_async, q.aio, run.run_id, "out", 0, math.nan)
    with pytest.raises(RunNotFound):
        list(read_stream(q, "run-nope", "out"))
    with pytest.raises(UsageError, match="workflow body or a step"):
        write_stream("out", 1)
    with pytest.raises(InvalidArgument, match="value"):
        write_stream("out", math.inf)


def test_runs_stream_command_follows_until_the_close(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with Querator(url) as q:
        run = start(q, progress, 2, True)
        command = [sys.executable, "-m", "querator.cli", "runs", "stream", run.run_id, "out"]
        follower = subprocess.Popen(
            [*command, "--url", url],
            cwd=Path(__file__).resolve().parents[2],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            with serving(Worker(q, [progress, tokens], poll_timeout=1.0), join_timeout=15):
                assert follower.stdout is not None
                lines = [follower.stdout.readline() for _ in range(3)]  # live, before the send
                assert [json.loads(line) for line in lines] == [START, "tok0", "tok1"]
                send(q, run.run_id, "go", 1)
                out, err = follower.communicate(timeout=30)
        finally:
            follower.kill()
        assert follower.returncode == 0, err
        assert [json.loads(line) for line in out.splitlines()] == [{"stage": "end", "got": 1}]
        refused = subprocess.run(
            [*command[:-2], "run-nope", "out", "--url", url],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert refused.returncode == 2 and "run-nope" in refused.stderr


def test_a_reader_sees_values_of_steps_writing_at_once(q: Querator, run_worker: RunWorker) -> None:
    # The later step (fast, position 1) writes first; the earlier one (slow,
    # position 0) writes once released. A reader whose cursor passed fast's
    # value would miss slow's: values are read in position order, a later
    # position's once the earlier ones ended.
    SLOW_WRITER.clear()
    try:
        with run_worker([mixed], concurrency=4):
            run = start(q, mixed)
            reader = Reader(q, run.run_id, "mix")
            prefix = stream_prefix(run.run_id, "mix")
            wait_for(lambda: q.scan_keys(RESULTS_QUEUE, prefix), timeout=20, message="fast")
            assert reader.values == []  # not read before the earlier position ended
            SLOW_WRITER.set()
            run.result(timeout=20)
            assert reader.finish() == ["slow", "fast"]
            assert list(read_stream(q, run.run_id, "mix", offset=1)) == ["fast"]
    finally:
        SLOW_WRITER.set()
