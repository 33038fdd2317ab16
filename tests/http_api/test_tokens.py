"""Bearer tokens: created, listed and revoked with the CLI, stored hashed;
401 and 403 as Querator; no non-loopback bind without a token."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from http_server import serve
from polling import wait_for

from http_api.token_cli import cli, create
from querator import Item, Querator
from querator.errors import Forbidden, Unauthorized
from querator.http import Querator as HttpQuerator


@pytest.fixture
def tokens(tmp_path: Path) -> tuple[str, dict[str, str]]:
    """A store with three tokens made by the CLI: its URL and the tokens by scope."""
    store = f"sqlite:///{tmp_path / 'tokens.db'}"
    with Querator(store):
        pass  # an empty store: tokens are created in it below
    made = {"read": create(store, "dashboards", "read")}
    made["write"] = create(store, "workers", "write")
    made["admin"] = create(store, "ops", "admin")
    return store, made


def test_tokens_are_listed_and_stored_hashed(tokens: tuple[str, dict[str, str]]) -> None:
    store, made = tokens
    listed = cli("tokens", "list", "--url", store)
    assert [line.split()[1:3] for line in listed.stdout.splitlines()[1:]] == [
        ["read", "dashboards"],
        ["write", "workers"],
        ["admin", "ops"],
    ]
    with Querator(store) as q:
        payloads = b"".join(item.payload for item in q.list_items("querator.tokens"))
    for token in made.values():
        assert token.rsplit("_", 1)[1].encode() not in payloads  # only hashes are stored
        assert token.split("_")[1] in listed.stdout


def test_tokens_guard_the_api_by_scope(tokens: tuple[str, dict[str, str]]) -> None:
    store, made = tokens
    with serve(store) as url:

        def post(path: str, token: str | None, **body: object) -> httpx.Response:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            return httpx.post(f"{url}{path}", json=body, headers=headers, timeout=30)

        missing = post("/v1/queues.list", None)
        assert (missing.status_code, missing.json()["message"]) == (401, "authentication required")
        wrong = post("/v1/queues.list", "qrt_nope_nope")
        assert (wrong.status_code, wrong.json()["message"]) == (401, "api key is invalid")
        scheme = httpx.post(f"{url}/v1/queues.list", json={}, headers={"Authorization": "x"})
        assert scheme.json()["message"] == "invalid authorization header format"
        assert post("/v1/queues.create", made["admin"], queue_name="jobs").status_code == 200
        denied = post("/v1/queues.create", made["write"], queue_name="other")
        assert denied.status_code == 403
        assert denied.json()["message"].startswith("access denied; ")
        assert post("/v1/queues.list", made["read"]).status_code == 200
        assert post("/v1/runs.reindex", made["write"]).status_code == 403  # an operator's call
        assert post("/v1/runs.reindex", made["admin"]).json() == {"count": 0}
        produce = {"queue_name": "jobs", "request_timeout": "5s", "items": [{"utf8": "x"}]}
        assert post("/v1/queue.produce", made["read"], **produce).status_code == 403
        assert post("/v1/queue.produce", made["write"], **produce).status_code == 200
        assert post("/v1/queues.pause", made["read"], queue_name="jobs").status_code == 403
        paused = post("/v1/queues.pause", made["write"], queue_name="jobs")
        assert (paused.status_code, paused.json()["paused"]) == (200, True)
        resumed = post("/v1/queues.resume", made["write"], queue_name="jobs")
        assert (resumed.status_code, resumed.json()["paused"]) == (200, False)
        with HttpQuerator(url, token=made["read"]) as q:
            assert q.stats("jobs").total == 1
            with pytest.raises(Forbidden):
                q.produce("jobs", [Item(payload=b"x")])
        with HttpQuerator(url) as q, pytest.raises(Unauthorized):
            q.stats("jobs")
        hook = {"url": "https://hooks.example.invalid/in"}  # endpoint records hold secrets:
        assert post("/v1/webhooks/endpoints.add", made["write"], **hook).status_code == 403
        assert post("/v1/webhooks/endpoints.add", made["admin"], **hook).status_code == 200
        assert post("/v1/webhooks/endpoints.list", made["read"]).status_code == 403
        assert post("/v1/webhooks/endpoints.list", made["admin"]).status_code == 200
        sent = post("/v1/webhooks/messages.send", made["write"], event_type="a.b", payload=1)
        assert sent.status_code == 200
        assert post("/v1/webhooks/failed.list", made["read"]).status_code == 200
        assert (
            post(
                "/v1/webhooks/failed.redrive", made["write"], since=sent.json()["created_at"]
            ).status_code
            == 403
        )

        token_id = made["write"].split("_")[1]
        assert cli("tokens", "revoke", token_id, "--url", store).returncode == 0
        wait_for(
            lambda: post("/v1/queues.list", made["write"]).status_code == 401,
            timeout=10,
            message="a revoked token is refused",
        )
    assert cli("tokens", "revoke", token_id, "--url", store).returncode == 1


def test_no_token_no_public_bind(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'open.db'}"
    with Querator(store):
        pass
    started = time.monotonic()
    done = cli("serve", "--url", store, "--host", "0.0.0.0", "--port", "0")
    assert done.returncode == 2
    assert "not a loopback address and no token exists" in done.stderr
    assert time.monotonic() - started < 30
    create(store, "ops", "admin")
    with serve(store, "--host", "0.0.0.0") as url:
        assert httpx.get(f"{url}/health", timeout=10).status_code == 200


def test_no_token_touches_the_token_records(tokens: tuple[str, dict[str, str]]) -> None:
    store, made = tokens
    forged = {"utf8": '{"id": "x", "name": "x", "scope": "admin", "secret_sha256": "00"}'}
    with serve(store) as url:
        for path, body in [
            ("/v1/queue.produce", {"queue_name": "querator.tokens", "request_timeout": "5s",
                                   "items": [forged]}),
            ("/v1/queue.transact", {"produce": {"querator.tokens": [forged]}}),
            ("/v1/storage/items.list", {"queue_name": "querator.tokens"}),
        ]:  # fmt: skip
            for scope in ("write", "admin"):
                headers = {"Authorization": f"Bearer {made[scope]}"}
                response = httpx.post(f"{url}{path}", json=body, headers=headers, timeout=30)
                assert response.status_code == 403, (path, response.text)
    with Querator(store) as q:
        assert len(q.list_items("querator.tokens")) == 3


def test_tokens_are_listed_as_json_and_dsn_is_a_deprecated_alias(
    tokens: tuple[str, dict[str, str]],
) -> None:
    store, made = tokens
    listed = cli("tokens", "list", "--json", "--url", store)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [(r["scope"], r["name"]) for r in rows] == [
        ("read", "dashboards"),
        ("write", "workers"),
        ("admin", "ops"),
    ]
    assert {r["id"] for r in rows} == {t.split("_")[1] for t in made.values()}
    assert all("secret_sha256" not in r and r["created_at"] for r in rows)
    old = cli("tokens", "list", "--json", "--dsn", store)
    assert old.returncode == 0 and json.loads(old.stdout) == rows
    assert "--dsn is deprecated, use --url" in old.stderr
