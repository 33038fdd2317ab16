"""Talking to a run over HTTP: runs.send, events.emit, runs.get_event (long poll) and
runs.read_stream (long poll with offsets), from the HTTP clients and with
tokens and scopes, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from http_server import serve
from polling import wait_for
from worker_threads import serving
from workflows.ops_procs import durable_url_for
from workflows.stream_flows import STREAM_QUEUE, approval, gate, progress, tokens

from querator import Querator, QueueSettings, Worker
from querator.errors import InvalidArgument
from querator.http import AsyncQuerator as AsyncHttpQuerator
from querator.http import Querator as HttpQuerator
from querator.interface import Client
from querator.workflows import RunFinished, RunNotFound, send, start


@pytest.fixture(params=["sqlite", "postgres"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Querator]]:
    """A server and a worker on one store, and a library client of it."""
    url = durable_url_for(request, tmp_path, str(request.param))
    with serve(url) as base, Querator(url) as q:
        q.create_queue(STREAM_QUEUE, QueueSettings(lease_timeout=1.0, expire_timeout=3600.0))
        with serving(Worker(q, [approval, gate, progress, tokens], poll_timeout=1.0)):
            yield base, q


def test_send_get_event_and_read_stream_over_http(served: tuple[str, Querator]) -> None:
    base, q = served
    run = start(q, approval, "ada")
    with HttpQuerator(base) as h:
        # the long poll waits for the first published value
        assert h.get_event(run.run_id, "status", timeout=30) == {"waiting_for": "ada"}
        page = h.read_stream_page(run.run_id, "log", 0, timeout=30)
        assert (page.values, page.next_offset, page.ended) == (["asked"], 1, False)
        # a live reader in a thread, woken by the send's commit through the worker
        read: list[Any] = []
        reader = threading.Thread(target=lambda: read.extend(h.read_stream(run.run_id, "log")))
        reader.start()
        wait_for(lambda: read == ["asked"], timeout=30, message="first value")
        h.send(run.run_id, "approve", {"by": "bob"}, idempotency_key="cb-1")
        assert run.result(timeout=30) == {"by": "bob"}
        reader.join(timeout=30)
        assert read == ["asked", {"by": "bob"}]  # ended with the run
        assert h.get_event(run.run_id, "status") == "done"
        page = h.read_stream_page(run.run_id, "log", 1)
        assert (page.values, page.next_offset, page.ended) == ([{"by": "bob"}], 2, True)
        with pytest.raises(RunFinished):
            h.send(run.run_id, "approve", 1)
        with pytest.raises(RunNotFound):
            h.send("run-nope", "approve", 1)
        with pytest.raises(RunNotFound):
            h.read_stream_page("run-nope", "log")
        with pytest.raises(InvalidArgument, match="topic"):
            h.send(run.run_id, "bad topic", 1)
        assert h.get_event(run.run_id, "never", timeout=0.05) is None

    async def follow() -> list[Any]:
        async with AsyncHttpQuerator(base) as a:
            return [v async for v in a.read_stream(run.run_id, "log", offset=1)]

    assert anyio.run(follow) == [{"by": "bob"}]


def test_emit_an_event_over_http(served: tuple[str, Querator]) -> None:
    base, q = served
    run = start(q, gate, "pay:1.ok")
    waiting = "events/pay:1.ok/waiting/"
    wait_for(lambda: q.scan_keys("querator.results", waiting), timeout=30, message="waiting")
    with HttpQuerator(base) as h:
        assert h.emit_event("pay:1.ok", {"cents": 1999}) is True
        assert run.result(timeout=30) == {"cents": 1999}
        assert h.emit_event("pay:1.ok", "again") is False  # the first emit wins
        with pytest.raises(InvalidArgument, match="name"):
            h.emit_event("bad name", 1)

    async def emit() -> bool:
        async with AsyncHttpQuerator(base) as a:
            return await a.emit_event("pay:2.ok", None)

    assert anyio.run(emit) is True
    assert start(q, gate, "pay:2.ok").result(timeout=30) is None  # its payload: null


def test_the_server_refuses_bad_input_with_400(served: tuple[str, Querator]) -> None:
    import httpx

    base, q = served
    run = start(q, approval, "x")
    for path, body, field in [
        ("/v1/runs.send", {"run_id": run.run_id, "topic": "a b", "value": 1}, "topic"),
        ("/v1/events.emit", {"name": "a\nb", "payload": 1}, "name"),
        ("/v1/events.emit", {"name": "", "payload": 1}, "name"),
        ("/v1/runs.read_stream", {"run_id": run.run_id, "key": "log", "offset": -1}, "offset"),
        ("/v1/runs.get_event", {"run_id": run.run_id, "key": "k", "request_timeout": "x"}, ""),
    ]:
        answer = httpx.post(f"{base}{path}", json=body, timeout=10)
        assert answer.status_code == 400, answer.text
        assert field in answer.text
    assert q.scan_keys("querator.results", f"{run.run_id}/msg/") == []
    assert "querator.events" not in {info.name for info in q.list_queues()}


def _events(lines: Iterator[str]) -> Iterator[tuple[str, str, str]]:
    """(event, id, data) of each server-sent event read from ``lines``."""
    event, ident, data = "message", "", ""
    for line in lines:
        if line == "":
            if data:
                yield event, ident, data
            event, ident, data = "message", "", ""
        elif line.startswith("event: "):
            event = line[len("event: ") :]
        elif line.startswith("id: "):
            ident = line[len("id: ") :]
        elif line.startswith("data: "):
            data = line[len("data: ") :]


def test_a_stream_as_server_sent_events(served: tuple[str, Querator]) -> None:
    import httpx

    base, q = served
    run = start(q, progress, 2, True)
    url = f"{base}/v1/runs.stream"
    with httpx.Client(timeout=30) as http:
        with http.stream("GET", url, params={"run_id": run.run_id, "key": "out"}) as answer:
            assert answer.status_code == 200
            assert answer.headers["content-type"].startswith("text/event-stream")
            events = _events(answer.iter_lines())
            seen = [next(events) for _ in range(3)]  # live: the run waits in recv
            assert [json.loads(data) for _, _, data in seen] == [
                {"stage": "start"},
                "tok0",
                "tok1",
            ]
            assert [ident for _, ident, _ in seen] == ["1", "2", "3"]
            send(q, run.run_id, "go", "now")
            rest = list(events)
        assert rest[0][0] == "message" and json.loads(rest[0][2]) == {"stage": "end", "got": "now"}
        assert rest[-1][0] == "end" and len(rest) == 2
        # resumed from the last id seen (EventSource sends it as Last-Event-ID)
        params = {"run_id": run.run_id, "key": "out"}
        resumed = http.get(url, params=params, headers={"Last-Event-ID": "3"})
        assert [e for e, _, _ in _events(iter(resumed.text.splitlines()))] == ["message", "end"]
        assert http.get(url, params={"run_id": "run-nope", "key": "out"}).status_code != 200
        bad = http.get(url, params={"run_id": run.run_id, "key": "a b"})
        assert bad.status_code == 400 and "key" in bad.text


def _talk(c: Client, q: Querator, who: str) -> None:
    """Send, get_event, read_stream(_page) and emit_event through ``c``, typed as
    the interface both the library and the HTTP clients satisfy."""
    run = start(q, approval, who)
    assert c.get_event(run.run_id, "status", timeout=30) == {"waiting_for": who}
    page = c.read_stream_page(run.run_id, "log", 0, timeout=30)
    assert (page.values, page.next_offset, page.ended) == (["asked"], 1, False)
    with pytest.raises(InvalidArgument, match="key"):
        c.read_stream(run.run_id, "a b")  # checked at the call, before iterating
    c.send(run.run_id, "approve", {"by": who}, idempotency_key=f"{who}-1")
    c.send(run.run_id, "approve", {"by": who}, idempotency_key=f"{who}-1")  # a no-op
    assert list(c.read_stream(run.run_id, "log")) == ["asked", {"by": who}]
    assert c.run(run.run_id).result(timeout=30) == {"by": who}
    assert c.get_event(run.run_id, "status") == "done"
    with pytest.raises(RunFinished):
        c.send(run.run_id, "approve", 1)
    with pytest.raises(RunNotFound):
        c.get_event("run-nope", "status")
    gated = start(q, gate, f"iface:{who}")
    waiting = f"events/iface:{who}/waiting/"
    wait_for(lambda: q.scan_keys("querator.results", waiting), timeout=30, message="waiting")
    assert c.emit_event(f"iface:{who}", {"n": 1}) is True
    assert c.emit_event(f"iface:{who}", {"n": 2}) is False
    assert gated.result(timeout=30) == {"n": 1}


def test_the_library_and_the_http_client_talk_to_runs_alike(
    served: tuple[str, Querator],
) -> None:
    base, q = served
    _talk(q, q, "library")
    with HttpQuerator(base) as h:
        _talk(h, q, "http")


def _signal(c: Client, who: str) -> None:
    """signal_with_start through ``c``: the message is in the mailbox as the run
    starts; a second call with the key sends to that run (ended: RunFinished)."""
    run = c.signal_with_start(
        approval, who, signal=("approve", {"by": who}), idempotency_key=f"sig-{who}"
    )
    assert run.result(timeout=30) == {"by": who}
    with pytest.raises(RunFinished):
        c.signal_with_start(approval, who, signal=("approve", 2), idempotency_key=f"sig-{who}")
    with pytest.raises(InvalidArgument, match="topic"):
        c.signal_with_start(approval, who, signal=("a b", 1))
    with pytest.raises(InvalidArgument, match="signal"):
        c.signal_with_start(approval, who, signal="approve")  # type: ignore[arg-type]


def test_signal_with_start_through_the_library_and_the_http_client(tmp_path: Path) -> None:
    import httpx
    from workflows import stream_flows

    url = f"sqlite:///{tmp_path / 'signal.db'}"
    with serve(url, "--app", stream_flows.__file__) as base, Querator(url) as q:
        q.create_queue(STREAM_QUEUE, QueueSettings(lease_timeout=1.0, expire_timeout=3600.0))
        with serving(Worker(q, [approval], poll_timeout=1.0)), HttpQuerator(base) as h:
            _signal(q, "library")
            _signal(h, "http")
            body: dict[str, Any] = {"workflow": approval.name, "args": ["x"], "delay": "1s"}
            body["signal"] = {"topic": "approve", "value": 1}
            answer = httpx.post(f"{base}/v1/workflows.start", json=body, timeout=10)
            assert answer.status_code == 400 and "signal" in answer.text, answer.text
            del body["delay"]
            body["priority"] = 5  # signal_with_start takes no priority: refused, not dropped
            answer = httpx.post(f"{base}/v1/workflows.start", json=body, timeout=10)
            assert answer.status_code == 400 and "priority" in answer.text, answer.text
        assert len(q.list_runs(workflow=approval.name)) == 2  # refused starts wrote nothing
