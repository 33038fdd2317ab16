"""The API never opens by itself (issue 28): once tokens are required, an
empty token set refuses every call; querator's internal queues cannot be
changed through the queue endpoints; /metrics and /openapi.json need a token.

Each test runs real ``querator serve`` and ``querator tokens`` processes on a
SQLite store of its own.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from http_server import serve
from polling import wait_for

from http_api.token_cli import cli, create, token_id
from querator import Item, Querator, QueueSettings

TOKENS = "querator.tokens"


@pytest.fixture
def store(tmp_path: Path) -> str:
    """The URL of an empty SQLite store."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with Querator(url):
        pass
    return url


def post(url: str, path: str, token: str | None = None, **body: object) -> httpx.Response:
    """POST ``body`` as JSON to ``path``, with ``token`` as bearer if given."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(f"{url}{path}", json=body, headers=headers, timeout=30)


def refused_without_token(url: str) -> bool:
    """True when a call without a token is refused (401)."""
    return post(url, "/v1/queues.list").status_code == 401


def test_an_admin_cannot_clear_or_delete_the_tokens(store: str) -> None:
    admin = create(store, "ops", "admin")
    with Querator(store) as q:
        ids = [item.id for item in q.list_items(TOKENS)]
    with serve(store) as url:
        cases: list[tuple[str, dict[str, object]]] = [
            ("/v1/queue.clear", {"queue_name": TOKENS, "queue": True, "destructive": True}),
            ("/v1/storage/items.delete", {"queue_name": TOKENS, "ids": ids}),
            ("/v1/queues.delete", {"queue_name": TOKENS, "force": True}),
            ("/v1/queues.update", {"queue_name": TOKENS, "expire_timeout": "1s"}),
            ("/v1/workflows.start", {"workflow": "any.flow", "queue": TOKENS}),
            ("/v1/dead.requeue", {"queue_name": TOKENS}),
        ]
        for path, body in cases:
            answer = post(url, path, admin, **body)
            assert answer.status_code == 403, (path, answer.text)
            assert f"'{TOKENS}' is internal to querator" in answer.json()["message"]
        assert refused_without_token(url)
        assert post(url, "/v1/queues.list", admin).status_code == 200
    with Querator(store) as q:
        assert [item.id for item in q.list_items(TOKENS)] == ids


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_revoking_the_last_token_refuses_everything(store: str, host: str) -> None:
    admin = create(store, "ops", "admin")
    with serve(store, "--host", host) as url:
        assert refused_without_token(url)
        assert cli("tokens", "revoke", token_id(admin), "--url", store).returncode == 0
        wait_for(
            lambda: post(url, "/v1/queues.list", admin).status_code == 401,
            timeout=10,
            message="the revoked token is refused",
        )
        answer = post(url, "/v1/queues.list")
        assert answer.status_code == 401, answer.text
        assert "no token exists" in answer.json()["message"]
        assert post(url, "/v1/queues.create", queue_name="open").status_code == 401


def test_an_expired_last_token_keeps_the_api_closed_across_restarts(store: str) -> None:
    create(store, "ops", "admin")
    with Querator(store) as q:  # what expiry does: the record is gone, the queue stays
        q.delete_items(TOKENS, [item.id for item in q.list_items(TOKENS)])
    with serve(store) as url:
        assert refused_without_token(url)
        assert httpx.get(f"{url}/health", timeout=10).status_code == 200
    with serve(store, "--no-auth") as url:
        assert post(url, "/v1/queues.list").status_code == 200
    public = cli("serve", "--url", store, "--host", "0.0.0.0", "--port", "0", "--no-auth")
    assert public.returncode == 2
    assert "--no-auth serves loopback addresses only" in public.stderr


def test_a_token_created_while_serving_closes_the_api_for_good(store: str) -> None:
    with serve(store) as url:
        assert post(url, "/v1/queues.list").status_code == 200  # loopback, no token yet
        admin = create(store, "ops", "admin")
        wait_for(lambda: refused_without_token(url), timeout=10, message="tokens required")
        assert post(url, "/v1/queues.list", admin).status_code == 200
        assert cli("tokens", "revoke", token_id(admin), "--url", store).returncode == 0
        wait_for(
            lambda: post(url, "/v1/queues.list", admin).status_code == 401,
            timeout=10,
            message="the revoked token is refused",
        )
        assert refused_without_token(url)


def test_internal_queues_are_read_only_through_the_queue_endpoints(store: str) -> None:
    admin = create(store, "ops", "admin")
    internal = "querator.workflows"
    with Querator(store) as q:
        q.create_queue(internal, QueueSettings(lease_timeout=60))
        q.create_queue("querator.results")
        q.produce(internal, [Item(payload=b"wake"), Item(payload=b"other")])
        leased = q.lease(internal, client_id="w", batch_size=1, timeout=1)[0]
    ref = {"id": leased.id, "version": leased.version}
    with serve(store) as url:
        writes: list[tuple[str, dict[str, object]]] = [
            ("/v1/queue.produce", {"queue_name": internal, "request_timeout": "5s",
                                   "items": [{"utf8": "forged"}]}),
            ("/v1/queue.lease", {"queue_name": internal, "client_id": "x", "batch_size": 1,
                                 "request_timeout": "1s"}),
            ("/v1/queue.complete", {"queue_name": internal, "request_timeout": "5s",
                                    "items": [ref]}),
            ("/v1/queue.retry", {"queue_name": internal, "items": [ref]}),
            ("/v1/queue.renew", {"queue_name": internal, "items": [ref]}),
            ("/v1/queue.transact", {"produce": {"querator.results": [{"utf8": "forged"}]}}),
            ("/v1/queue.transact", {"complete": [{"queue_name": internal, **ref}]}),
            ("/v1/queue.clear", {"queue_name": internal, "queue": True}),
            ("/v1/queues.create", {"queue_name": "querator.mine"}),
            ("/v1/queues.create", {"queue_name": "evil", "dead_queue": "querator.results"}),
            ("/v1/queues.update", {"queue_name": internal, "max_attempts": 1}),
            ("/v1/queues.delete", {"queue_name": internal, "force": True}),
            ("/v1/storage/items.import", {"queue_name": internal, "items": [{"payload": "eA=="}]}),
            ("/v1/storage/items.delete", {"queue_name": internal, "ids": [leased.id]}),
        ]  # fmt: skip
        for path, body in writes:
            answer = post(url, path, admin, **body)
            assert answer.status_code == 403, (path, answer.text)
        for path in ("/v1/queue.stats", "/v1/queues.info", "/v1/storage/items.list"):
            assert post(url, path, admin, queue_name=internal).status_code == 200, path
        for path in ("/v1/queue.stats", "/v1/queues.info", "/v1/storage/items.list"):
            assert post(url, path, admin, queue_name=TOKENS).status_code == 403, path
    with Querator(store) as q:
        assert q.stats(internal).total == 2
        assert q.get_queue(internal).settings.max_attempts != 1
        assert q.list_items("querator.results") == []
        assert "evil" not in [info.name for info in q.list_queues()]


def test_metrics_and_the_api_description_need_a_token(store: str) -> None:
    scrape = create(store, "prometheus", "metrics")
    reader = create(store, "dashboards", "read")

    def get(path: str, token: str | None = None) -> int:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.get(f"{url}{path}", headers=headers, timeout=30).status_code

    with serve(store) as url:
        assert [get("/metrics"), get("/openapi.json"), get("/docs")] == [401, 401, 401]
        assert get("/health") == 200
        assert get("/metrics", scrape) == 200
        assert [get("/openapi.json", scrape), get("/docs", scrape)] == [403, 403]
        assert post(url, "/v1/queues.list", scrape).status_code == 403
        assert [get("/metrics", reader), get("/openapi.json", reader)] == [200, 200]
