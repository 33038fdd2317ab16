"""Workflows, schedules and dead letters through the HTTP API: a live server
(``--app`` naming the workflows) and a worker on the same store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_server import serve
from worker_threads import serving

from querator import Querator, Worker

from . import http_flows

FLOWS = Path(http_flows.__file__)


@pytest.fixture
def http(tmp_path: Path) -> Iterator[httpx.Client]:
    """A client of a server over a fresh SQLite store, with a worker on that store."""
    url = f"sqlite:///{tmp_path / 'flows.db'}"
    with (
        serve(url, "--app", str(FLOWS)) as base,
        Querator(url) as q,
        serving(Worker(q, [http_flows.greet, http_flows.doomed, http_flows.slow])),
        httpx.Client(base_url=base, timeout=60) as client,
    ):
        yield client


def call(http: httpx.Client, path: str, **body: Any) -> Any:
    response = http.post(path, json=body, headers={"Querator-Extras": "true"})
    assert response.status_code == 200, response.text
    return response.json()


def test_a_run_started_by_name_is_awaited_inspected_and_listed(http: httpx.Client) -> None:
    body = {"workflow": "http.greet", "args": ["ada"], "kwargs": {"punctuation": "?"}}
    first = call(http, "/v1/workflows.start", **body, idempotency_key="greet-ada")
    again = call(http, "/v1/workflows.start", **body, idempotency_key="greet-ada")
    assert first == again  # one key, one run
    run_id = first["run_id"]
    done = call(http, "/v1/runs.result", run_id=run_id, request_timeout="30s")
    assert done == {
        "run_id": run_id,
        "status": "completed",
        "result": "HELLO, ADA?",
        "error_type": None,
        "error_message": None,
        "saga": False,
        "compensations": [],
    }
    run = call(http, "/v1/runs.get", run_id=run_id)
    assert (run["workflow"], run["status"]) == ("http.greet", "completed")
    assert [(s["step"], s["ok"]) for s in run["steps"]] == [("http.shout", True)]
    other = call(http, "/v1/workflows.start", workflow="http.greet", args=["bob"])["run_id"]
    call(http, "/v1/runs.result", run_id=other, request_timeout="30s")
    listed = call(http, "/v1/runs.list", workflow="http.greet", status="completed", limit=1)
    page = [r["run_id"] for r in listed["runs"]]
    rest = call(http, "/v1/runs.list", workflow="http.greet", after=page[-1])["runs"]
    assert sorted(page + [r["run_id"] for r in rest]) == sorted([run_id, other])


def test_a_failed_run_answers_its_error(http: httpx.Client) -> None:
    run_id = call(http, "/v1/workflows.start", workflow="http.doomed", args=["no"])["run_id"]
    done = call(http, "/v1/runs.result", run_id=run_id, request_timeout="30s")
    assert (done["status"], done["error_type"]) == ("failed", "StepFailed")
    assert done["error_message"] == "step 'http.explode' (position 0) failed: ValueError: no"
    assert call(http, "/v1/runs.list", status="failed")["runs"][0]["run_id"] == run_id


def test_an_idempotency_key_reuse_policy_is_honoured(http: httpx.Client) -> None:
    body = {"workflow": "http.doomed", "args": ["no"], "idempotency_key": "doom"}
    policy = "allow_duplicate_failed_only"
    first = call(http, "/v1/workflows.start", **body, id_reuse_policy=policy)["run_id"]
    call(http, "/v1/runs.result", run_id=first, request_timeout="30s")
    second = call(http, "/v1/workflows.start", **body, id_reuse_policy=policy)["run_id"]
    assert second != first  # the first failed: a new run
    response = http.post(
        "/v1/workflows.start", json={**body, "id_reuse_policy": "reject_duplicate"}
    )
    assert response.status_code == 409, response.text
    assert response.json()["details"]["run_id"] == second
    response = http.post("/v1/workflows.start", json={**body, "id_reuse_policy": "never"})
    assert response.status_code == 400, response.text


def test_waiting_for_a_running_run_times_out_with_454_and_cancel_ends_it(
    http: httpx.Client,
) -> None:
    run_id = call(http, "/v1/workflows.start", workflow="http.slow", args=[0.5])["run_id"]
    response = http.post("/v1/runs.result", json={"run_id": run_id, "request_timeout": "50ms"})
    assert response.status_code == 454
    assert call(http, "/v1/runs.cancel", run_id=run_id, reason="enough") == {"changed": True}
    done = call(http, "/v1/runs.result", run_id=run_id, request_timeout="30s")
    assert (done["status"], done["error_message"]) == ("cancelled", "enough")
    assert call(http, "/v1/runs.cancel", run_id=run_id) == {"changed": False}
    assert call(http, "/v1/runs.retry_compensation", run_id=run_id) == {"changed": False}


def test_nan_in_arguments_is_refused_naming_the_argument(http: httpx.Client) -> None:
    for number in ["NaN", "Infinity", "-Infinity"]:
        body = b'{"workflow": "http.slow", "args": [' + number.encode() + b"]}"
        json_type = {"content-type": "application/json"}
        response = http.post("/v1/workflows.start", content=body, headers=json_type)
        assert response.status_code == 400, response.text
        assert "argument 'seconds'" in response.json()["message"], response.text
    assert call(http, "/v1/runs.list")["runs"] == []


def test_unknown_runs_and_workflows_are_refused(http: httpx.Client) -> None:
    response = http.post("/v1/runs.get", json={"run_id": "nope"})
    assert response.status_code == 453
    assert response.json()["message"] == "run does not exist; no run 'nope' is stored"
    response = http.post("/v1/workflows.start", json={"workflow": "http.unknown"})
    assert response.status_code == 400
    assert "no workflow named 'http.unknown'" in response.json()["message"]


def test_schedules_are_created_paused_resumed_triggered_and_deleted(http: httpx.Client) -> None:
    call(http, "/v1/schedules.create", name="nightly", workflow="http.greet",
         cron="0 3 * * *", args=["night"])  # fmt: skip
    [listed] = call(http, "/v1/schedules.list")["schedules"]
    assert (listed["name"], listed["workflow"], listed["paused"]) == (
        "nightly",
        "http.greet",
        False,
    )
    call(http, "/v1/schedules.pause", name="nightly", note="maintenance")
    assert call(http, "/v1/schedules.list")["schedules"][0]["paused"] is True
    call(http, "/v1/schedules.resume", name="nightly")
    assert call(http, "/v1/schedules.list")["schedules"][0]["paused"] is False
    run_id = call(http, "/v1/schedules.trigger", name="nightly")["run_id"]
    done = call(http, "/v1/runs.result", run_id=run_id, request_timeout="30s")
    assert done["result"] == "HELLO, NIGHT!"
    assert call(http, "/v1/schedules.delete", name="nightly") == {"changed": True}
    assert call(http, "/v1/schedules.list")["schedules"] == []


def test_dead_letters_are_listed_and_requeued(http: httpx.Client) -> None:
    call(http, "/v1/queues.create", queue_name="jobs-dead")
    call(http, "/v1/queues.create", queue_name="jobs", dead_queue="jobs-dead")
    call(http, "/v1/queue.produce", queue_name="jobs", request_timeout="5s",
         items=[{"utf8": "poison"}])  # fmt: skip
    leased = call(http, "/v1/queue.lease", queue_name="jobs", client_id="w", batch_size=1,
                  request_timeout="5s")["items"]  # fmt: skip
    ref = {"id": leased[0]["id"], "version": leased[0]["version"], "dead": True}
    call(http, "/v1/queue.retry", queue_name="jobs", items=[ref])
    [dead] = call(http, "/v1/dead.list", queue_name="jobs")["items"]
    assert (dead["source_id"], dead["payload"]) == (leased[0]["id"], "cG9pc29u")
    assert dead["source_queue"] == "jobs"
    assert call(http, "/v1/dead.requeue", queue_name="jobs") == {"count": 1}
    assert call(http, "/v1/dead.list", queue_name="jobs")["items"] == []
    back = call(http, "/v1/queue.lease", queue_name="jobs", client_id="w", batch_size=1,
                request_timeout="5s")["items"]  # fmt: skip
    assert back[0]["bytes"] == "cG9pc29u"


def test_dead_letters_are_shown_and_purged(http: httpx.Client) -> None:
    call(http, "/v1/queues.create", queue_name="gone-dead")
    call(http, "/v1/queues.create", queue_name="gone", dead_queue="gone-dead")
    call(http, "/v1/queue.produce", queue_name="gone", request_timeout="5s",
         items=[{"utf8": "a"}, {"utf8": "b"}])  # fmt: skip
    leased = call(http, "/v1/queue.lease", queue_name="gone", client_id="w", batch_size=2,
                  request_timeout="5s")["items"]  # fmt: skip
    refs = [{"id": item["id"], "version": item["version"], "dead": True} for item in leased]
    call(http, "/v1/queue.retry", queue_name="gone", items=refs)
    first, second = call(http, "/v1/dead.list", queue_name="gone")["items"]
    shown = call(http, "/v1/dead.show", queue_name="gone", id=first["id"])
    assert (shown["source_id"], shown["payload"]) == (first["source_id"], first["payload"])
    assert shown["source_queue"] == "gone"
    missing = http.post("/v1/dead.show", json={"queue_name": "gone", "id": "0.0.9"})
    assert missing.status_code == 400
    assert "is not a dead letter of 'gone'" in missing.json()["message"]
    assert call(http, "/v1/dead.purge", queue_name="gone", ids=[first["id"]]) == {"count": 1}
    assert [i["id"] for i in call(http, "/v1/dead.list", queue_name="gone")["items"]] == [
        second["id"]
    ]
    assert call(http, "/v1/dead.purge", queue_name="gone") == {"count": 1}
    assert call(http, "/v1/dead.list", queue_name="gone")["items"] == []


def test_runs_are_resumed_and_forked(http: httpx.Client) -> None:
    run_id = call(http, "/v1/workflows.start", workflow="http.slow", args=[0.2])["run_id"]
    assert call(http, "/v1/runs.cancel", run_id=run_id, reason="pause") == {"changed": True}
    assert call(http, "/v1/runs.result", run_id=run_id, request_timeout="30s")["status"] == (
        "cancelled"
    )
    assert call(http, "/v1/runs.resume", run_id=run_id) == {"changed": True}
    assert call(http, "/v1/runs.result", run_id=run_id, request_timeout="30s")["status"] == (
        "completed"
    )
    assert call(http, "/v1/runs.resume", run_id=run_id) == {"changed": False}
    fork = call(http, "/v1/runs.fork", run_id=run_id, from_step=0)["run_id"]
    assert fork != run_id
    done = call(http, "/v1/runs.result", run_id=fork, request_timeout="30s")
    assert done["status"] == "completed"
    for beyond in (99, 10**15):  # a huge one is refused as fast (no lookup of each position)
        response = http.post("/v1/runs.fork", json={"run_id": run_id, "from_step": beyond})
        assert response.status_code == 400
        assert response.json()["details"]["field"] == "from_step"
    response = http.post("/v1/runs.resume", json={"run_id": "nope"})
    assert response.status_code == 453


def test_a_run_started_with_a_priority_carries_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'prio.db'}"
    with (
        serve(url, "--app", str(FLOWS)) as base,
        Querator(url) as q,
        httpx.Client(base_url=base, timeout=60) as http,
    ):
        body = {"workflow": "http.greet", "args": ["ada"]}
        run_id = call(http, "/v1/workflows.start", **body, priority=7)["run_id"]
        wakes = [item for item in q.list_items(http_flows.QUEUE) if item.reference == run_id]
        assert [item.priority for item in wakes] == [7]  # no worker: its start wake waits
        for bad, code in [(True, 455), ("7", 455), (40_000, 400)]:
            response = http.post("/v1/workflows.start", json={**body, "priority": bad})
            assert response.status_code == code, response.text
            assert "priority" in response.json()["message"]


def test_runs_are_started_with_search_attributes_and_listed_by_them(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'attrs.db'}"
    with (
        serve(url, "--app", str(FLOWS)) as base,
        httpx.Client(base_url=base, timeout=60) as http,
    ):
        body = {"workflow": "http.greet", "args": ["ada"]}
        acme = call(http, "/v1/workflows.start", **body, attributes={"customer": "acme", "n": 2})
        call(http, "/v1/workflows.start", **body, attributes={"customer": "globex"})
        run = call(http, "/v1/runs.get", run_id=acme["run_id"])
        assert run["attributes"] == {"customer": "acme", "n": 2}
        listed = call(http, "/v1/runs.list", attributes={"customer": "acme"})["runs"]
        assert [r["run_id"] for r in listed] == [acme["run_id"]]
        assert call(http, "/v1/runs.list", attributes={"customer": "acme", "n": "2"})["runs"] == []
        for bad in [{"n": 1.5}, {"x" * 65: 1}, {"note": "y" * 257}]:
            for path, sent in [("/v1/workflows.start", body), ("/v1/runs.list", {})]:
                response = http.post(path, json={**sent, "attributes": bad})
                assert response.status_code == 400, response.text
                assert "attributes" in response.json()["message"]
        assert len(call(http, "/v1/runs.list")["runs"]) == 2  # nothing written by the bad ones
