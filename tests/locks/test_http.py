"""``/v1/locks.*`` on a real ``querator serve`` process."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest
from http_server import serve
from polling import wait_for

from querator import Querator, http
from querator.errors import LockLost, RequestTimeout
from querator.http.wire.locks import PermitReply
from querator.locks import Semaphore, list_semaphores


def test_hold_a_lock_over_http(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'locks.db'}"
    with serve(store) as url, httpx.Client(base_url=url, timeout=30) as http:
        taken = http.post(
            "/v1/locks.acquire",
            json={"name": "job", "client_id": "sh-1", "lease": "500ms", "request_timeout": "5s"},
        )
        assert taken.status_code == 200, taken.text
        permit = taken.json()
        assert (permit["permit"], permit["token"]) == (0, permit["version"])
        busy = http.post("/v1/locks.acquire", json={"name": "job", "client_id": "sh-2"})
        assert busy.status_code == 454, "held: a try without waiting finds none"
        held = {key: permit[key] for key in ("name", "id", "version", "permit", "token")}
        renewed = http.post("/v1/locks.renew", json=held).json()
        assert renewed["version"] > permit["version"] and renewed["token"] == permit["token"]
        listed = http.post("/v1/locks.list", json={}).json()["semaphores"]
        assert [(s["name"], s["holders"][0]["client_id"]) for s in listed] == [("job", "sh-1")]
        stale = http.post("/v1/locks.release", json=held)  # the version before the renew
        assert stale.status_code == 409
        assert stale.json()["details"] == {
            "type": "LockLost",
            "name": "job",
            "token": str(permit["token"]),
        }
        released = http.post("/v1/locks.release", json={**held, "version": renewed["version"]})
        assert released.status_code == 200, released.text
        again = http.post("/v1/locks.acquire", json={"name": "job", "client_id": "sh-2"})
        assert again.json()["token"] > permit["token"]
        with Querator(store) as q:
            Semaphore(q, "pool", 2)
            grown = http.post(
                "/v1/locks.acquire", json={"name": "pool", "limit": 3, "client_id": "sh-3"}
            )
            assert grown.status_code == 200, grown.text
            assert {s.name: s.limit for s in list_semaphores(q)} == {"job": 1, "pool": 3}


def test_bad_lock_requests_are_refused_and_write_nothing(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'locks.db'}"
    with serve(store) as url, httpx.Client(base_url=url, timeout=30) as http:
        for body, field in [
            ({"name": "a b", "client_id": "c"}, "name"),
            ({"name": "x" * 201, "client_id": "c"}, "name"),
            ({"name": "a\u0001", "client_id": "c"}, "name"),
            ({"name": "ok", "client_id": "c", "limit": 0}, "limit"),
            ({"name": "ok", "client_id": "c", "limit": -3}, "limit"),
            ({"name": "ok", "client_id": "c", "request_timeout": "20m"}, "request_timeout"),
        ]:
            answer = http.post("/v1/locks.acquire", json=body)
            assert answer.status_code == 400, (body, answer.text)
            assert field in answer.text
        assert http.post("/v1/locks.list", json={}).json()["semaphores"] == []


def test_the_python_http_client_holds_a_lock(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'client.db'}"
    with serve(store) as url, http.Querator(url) as client:
        permit = client.acquire_lock("deploy", "ci-1", limit=1, lease=5)
        assert (permit.name, permit.permit, permit.token) == ("deploy", 0, permit.version)
        with pytest.raises(RequestTimeout):
            client.acquire_lock("deploy", "ci-2")
        taken: list[PermitReply] = []
        waiter = threading.Thread(
            target=lambda: taken.append(client.acquire_lock("deploy", "ci-3", timeout=30))
        )
        waiter.start()
        wait_for(lambda: client.list_locks()[0].waiters, 30, message="ci-3 waits")
        [info] = client.list_locks()
        assert [h.client_id for h in info.holders] == ["ci-1"]
        assert [w.client_id for w in info.waiters] == ["ci-3"]
        renewed = client.renew_lock(permit)
        assert renewed.version > permit.version and renewed.token == permit.token
        with pytest.raises(LockLost):
            client.release_lock(permit)  # the version before the renew
        client.release_lock(renewed)
        waiter.join(30)
        assert taken and taken[0].token > permit.token
        client.release_lock(taken[0])
