"""Background tasks through the HTTP API: a live server (``--app`` naming the
tasks) and a worker on the same store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from http_server import serve
from polling import wait_for
from tasks import app_tasks
from worker_threads import serving

from querator import Querator, Worker
from querator.errors import InvalidArgument
from querator.http import AsyncQuerator as AsyncHttpQuerator
from querator.http import Querator as HttpQuerator
from querator.tasks.layout import TASK_QUEUE

APP = Path(app_tasks.__file__)


@pytest.fixture
def http(tmp_path: Path) -> Iterator[httpx.Client]:
    """A client of a server over a fresh SQLite store, with a worker on that store."""
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    with (
        serve(url, "--app", str(APP)) as base,
        Querator(url) as q,
        serving(Worker(q, app_tasks.ALL, poll_timeout=0.5, scheduler=False)),
        httpx.Client(base_url=base, timeout=60) as client,
    ):
        yield client


def call(http: httpx.Client, path: str, **body: Any) -> Any:
    response = http.post(path, json=body, headers={"Querator-Extras": "true"})
    assert response.status_code == 200, response.text
    return response.json()


def test_a_task_deferred_over_http_runs_and_reports_its_outcome(http: httpx.Client) -> None:
    deferred = call(http, "/v1/tasks.defer", name="t.add", args={"a": 1, "b": 2})
    task_id = deferred["task_id"]
    done = wait_for(
        lambda: (reply := call(http, "/v1/tasks.status", task_id=task_id))["done"] and reply,
        timeout=30,
        message="t.add done",
    )
    assert (done["ok"], done["result"], done["attempts"]) == (True, 3, 1)
    failed = call(http, "/v1/tasks.defer", name="t.boom", args={"key": "h"})
    outcome = wait_for(
        lambda: (r := call(http, "/v1/tasks.status", task_id=failed["task_id"]))["done"] and r,
        timeout=30,
    )
    assert (outcome["ok"], outcome["error_type"]) == (False, "ValueError")
    [dead] = call(http, "/v1/tasks.list", failed=True)["tasks"]
    assert (dead["name"], dead["state"]) == ("t.boom", "failed")
    assert dead["reason"].startswith("ValueError: bad input h")


def test_waiting_tasks_are_listed_and_bad_arguments_refused(http: httpx.Client) -> None:
    later = call(http, "/v1/tasks.defer", name="t.noop", args={"key": "x"}, delay="1h")
    [listed] = call(http, "/v1/tasks.list", name="t.noop")["tasks"]
    assert (listed["id"], listed["state"]) == (later["id"], "scheduled")
    refused = http.post(
        "/v1/tasks.defer",
        json={"name": "t.add", "args": {"a": "x", "b": 1}},
        headers={"Querator-Extras": "true"},
    )
    assert refused.status_code == 400
    assert "argument 'a'" in refused.json()["message"]
    pending = call(http, "/v1/tasks.status", task_id="0" * 32)
    assert pending == {
        "task_id": "0" * 32,
        "done": False,
        "ok": None,
        "result": None,
        "error_type": None,
        "message": None,
        "attempts": None,
    }


def test_the_http_clients_defer_list_and_read_tasks(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    with (
        serve(url, "--app", str(APP)) as base,
        Querator(url) as q,
        serving(Worker(q, app_tasks.ALL, poll_timeout=0.5, scheduler=False)),
        HttpQuerator(base) as h,
    ):
        item_id, task_id = h.defer_task("t.add", {"a": 2, "b": 5})
        wait_for(lambda: h.task_status(task_id).done, timeout=30, message="t.add done")
        done = h.task_status(task_id)
        assert (done.ok, done.result, done.attempts) == (True, 7, 1)
        later_id, _ = h.defer_task("t.noop", {"key": "y"}, delay=3600, idempotency_key="y")
        assert h.defer_task("t.noop", {"key": "y"}, delay=3600, idempotency_key="y")[0] == later_id
        [listed] = h.list_tasks(name="t.noop")
        assert (listed.id, listed.state) == (later_id, "scheduled")
        with pytest.raises(InvalidArgument, match="argument 'a'"):
            h.defer_task("t.add", {"a": "x", "b": 1})
        with pytest.raises(InvalidArgument):
            h.defer_task("", {})
        assert h.list_tasks(name="t.add") == []  # refused calls wrote nothing; t.add ran

        async def failed() -> list[str]:
            async with AsyncHttpQuerator(base) as a:
                _, boom = await a.defer_task("t.boom", {"key": "z"})
                wait = await a.task_status(boom)
                assert wait.task_id == boom
                listed = await a.list_tasks(failed=True)
                return [info.name for info in listed]

        names = anyio.run(failed)
        assert names in ([], ["t.boom"])  # failed once the worker has dead-lettered it
        wait_for(lambda: h.list_tasks(failed=True), timeout=30, message="t.boom dead")
        [dead] = h.list_tasks(failed=True)
        with pytest.raises(InvalidArgument, match="not dead letters"):
            h.retry_tasks(ids=["nope"])
        assert h.retry_tasks(ids=[dead.id]) == 1  # back with fresh attempts (fails again)
        wait_for(lambda: h.list_tasks(failed=True), timeout=30, message="t.boom dead again")
        assert h.cancel_task(later_id) is True  # scheduled, not started: removed
        assert h.cancel_task(later_id) is False
        assert h.list_tasks(name="t.noop") == []
        with pytest.raises(InvalidArgument):
            h.cancel_task("")
        assert item_id.startswith(f"{q.get_queue('querator.tasks').queue_id}.")


def test_a_task_deferred_by_name_over_http_keeps_its_priority(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    with serve(url, "--app", str(APP)) as base, Querator(url) as q, HttpQuerator(base) as h:
        item_id, _ = h.defer_task("t.noop", {"key": "p"}, delay=3600, priority=9)
        plain_id, _ = h.defer_task("t.noop", {"key": "q"}, delay=3600)
        stored = {item.id: item.priority for item in q.list_items(TASK_QUEUE)}
        assert stored == {item_id: 9, plain_id: 0}
        with pytest.raises(InvalidArgument, match="priority"):
            h.defer_task("t.noop", {"key": "r"}, priority=40_000)
        with pytest.raises(InvalidArgument, match="priority"):
            h.defer_task("t.noop", {"key": "r"}, priority=True)
        assert len(q.list_items(TASK_QUEUE)) == 2  # the refused calls wrote nothing
