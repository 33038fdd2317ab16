"""Querator's catalogue of bad input, each answered with its status and message."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

LONG = "x" * 513


@pytest.fixture(scope="module")
def http(server: str) -> Iterator[httpx.Client]:
    """A client of the module's server, with a queue named ``known``."""
    with httpx.Client(base_url=server, timeout=30) as client:
        assert client.post("/v1/queues.create", json={"queue_name": "known"}).status_code == 200
        yield client


def lease(**fields: Any) -> dict[str, Any]:
    return {"queue_name": "known", "client_id": "c", "batch_size": 1,
            "request_timeout": "1s", **fields}  # fmt: skip


def produce(**fields: Any) -> dict[str, Any]:
    return {"queue_name": "known", "request_timeout": "1s", "items": [{"utf8": "x"}], **fields}


CATALOGUE: list[tuple[str, str, Any, int, str]] = [
    ("empty queue name", "/v1/queue.produce", produce(queue_name=""), 400,
     "queue name is invalid; queue name cannot be empty"),
    ("blank queue name", "/v1/queue.lease", lease(queue_name="  "), 400,
     "queue name is invalid; queue name cannot be empty"),
    ("whitespace in name", "/v1/queues.create", {"queue_name": "a b"}, 400,
     "queue name is invalid; 'a b' cannot contain whitespace"),
    ("tilde in name", "/v1/queues.create", {"queue_name": "a~b"}, 400,
     "queue name is invalid; 'a~b' cannot contain '~' character"),
    ("name over the limit", "/v1/queues.create", {"queue_name": LONG}, 400,
     "queue name is invalid; cannot be greater than '512' characters"),
    ("name the library refuses", "/v1/queues.create", {"queue_name": "a/b"}, 400,
     "name is invalid; 'a/b' must be 1-512 characters"),
    ("empty client id", "/v1/queue.lease", lease(client_id=""), 400,
     "invalid client id; cannot be empty"),
    ("batch size 0", "/v1/queue.lease", lease(batch_size=0), 400,
     "invalid batch size; must be greater than zero"),
    ("batch size over the maximum", "/v1/queue.lease", lease(batch_size=1001), 400,
     "invalid batch size; max_lease_batch_size is 1000, but 1001 was requested"),
    ("no items", "/v1/queue.produce", produce(items=[]), 400,
     "items cannot be empty; at least one item is required"),
    ("too many items", "/v1/queue.produce", produce(items=[{}] * 1001), 400,
     "items is invalid; max_produce_batch_size is 1000 but received 1001"),
    ("request_timeout missing", "/v1/queue.lease",
     {"queue_name": "known", "client_id": "c", "batch_size": 1}, 400,
     "request timeout is required; '5m' is recommended, 15m is the maximum"),
    ("request_timeout missing on produce", "/v1/queue.produce",
     {"queue_name": "known", "items": [{}]}, 400, "request timeout is required"),
    ("request_timeout too short", "/v1/queue.lease", lease(request_timeout="5ms"), 400,
     "request timeout is invalid; minimum timeout is '10ms' but '5ms' was requested"),
    ("request_timeout too long", "/v1/queue.lease", lease(request_timeout="16m"), 400,
     "request timeout is invalid; maximum timeout is '15m' but '16m0s' was requested"),
    ("request_timeout malformed", "/v1/queue.lease", lease(request_timeout="soon"), 400,
     "request timeout is invalid; time: invalid duration 'soon' - expected format"),
    ("unknown queue", "/v1/queue.lease", lease(queue_name="nowhere"), 400,
     "queue does not exist; no such queue named 'nowhere'"),
    ("unknown queue on stats", "/v1/queue.stats", {"queue_name": "nowhere"}, 400,
     "queue does not exist; no such queue named 'nowhere'"),
    ("queue exists", "/v1/queues.create", {"queue_name": "known"}, 400,
     "invalid queue; 'known' already exists"),
    ("malformed id", "/v1/queue.complete",
     {"queue_name": "known", "request_timeout": "1s", "ids": ["not-an-id"]}, 400,
     "invalid storage id; 'not-an-id'"),
    ("malformed id on delete", "/v1/storage/items.delete",
     {"queue_name": "known", "ids": ["1.x.2"]}, 400, "invalid storage id; '1.x.2'"),
    ("no ids", "/v1/queue.complete", {"queue_name": "known", "request_timeout": "1s"}, 400,
     "ids is invalid; list of ids cannot be empty"),
    ("unknown id", "/v1/queue.complete",
     {"queue_name": "known", "request_timeout": "1s", "items": [{"id": "1.0.99", "version": 2}]},
     400, "invalid storage id; '1.0.99' does not exist"),
    ("id of another queue", "/v1/queue.complete",
     {"queue_name": "known", "request_timeout": "1s", "ids": ["999999.0.5"]},
     400, "invalid storage id; '999999.0.5' does not exist"),
    ("bad base64", "/v1/queue.produce", produce(items=[{"bytes": "@@"}]), 400,
     "is not valid base64"),
    ("naive enqueue_at", "/v1/queue.produce",
     produce(items=[{"enqueue_at": "2030-01-01T00:00:00"}]), 400, "timezone"),
    ("priority out of range", "/v1/queue.produce", produce(items=[{"priority": 40_000}]), 400,
     "priority is invalid; must be from -32768 to 32767, got 40000"),
    ("priority not an int", "/v1/queue.produce", produce(items=[{"priority": True}]), 455,
     "priority"),
    ("clear naming nothing", "/v1/queue.clear", {"queue_name": "known"}, 400,
     "invalid clear request; one of 'queue', 'scheduled' or 'destructive' must be true"),
    ("unknown field", "/v1/queue.stats", {"queue_name": "known", "colour": "red"}, 455,
     "colour"),
    ("not JSON", "/v1/queue.stats", "{nope", 455, "proto:"),
    ("wrong JSON type", "/v1/queue.lease", lease(batch_size="many"), 455, "batch_size"),
]  # fmt: skip
"""(case, path, body, status, message or the start of it)."""


@pytest.mark.parametrize(
    ("path", "body", "code", "message"),
    [case[1:] for case in CATALOGUE],
    ids=[case[0] for case in CATALOGUE],
)
def test_bad_input_is_answered_with_its_status_and_message(
    http: httpx.Client, path: str, body: Any, code: int, message: str
) -> None:
    if isinstance(body, str):
        response = http.post(path, content=body, headers={"Content-Type": "application/json"})
    else:
        response = http.post(path, json=body)
    assert response.status_code == code, response.text
    reply = response.json()
    assert reply["code"] == code
    assert message in reply["message"], reply["message"]
    assert set(reply) == {"code", "code_text", "message", "details"}


def test_bodies_over_the_endpoint_cap_are_refused(http: httpx.Client) -> None:
    big = {"queue_name": "known", "client_id": "c" * 300_000, "batch_size": 1}
    response = http.post("/v1/queue.lease", json=big)  # its cap holds a batch to complete
    assert (response.status_code, response.json()["message"]) == (
        400,
        "request body exceeds 250.0KiB limit",
    )
    huge = produce(items=[{"utf8": "x" * 6_000_000}])
    response = http.post("/v1/queue.produce", json=huge)
    assert (response.status_code, response.json()["message"]) == (
        400,
        "request body exceeds 5.0MB limit",
    )


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
def test_methods_other_than_post_are_refused(http: httpx.Client, method: str) -> None:
    response = http.request(method, "/v1/queue.produce")
    assert response.status_code == 400
    assert response.json()["message"] == f"http method '{method}' not allowed; only POST"


def test_unknown_paths_are_not_implemented(http: httpx.Client) -> None:
    response = http.post("/v1/queue.teleport", json={})
    assert response.status_code == 501
    assert response.json() == {
        "code": 501,
        "code_text": "Not Implemented",
        "message": "no such method; /v1/queue.teleport",
        "details": {},
    }


@pytest.mark.parametrize("kind", ["text/plain", "application/x-www-form-urlencoded", "image/png"])
def test_wrong_content_types_are_refused(http: httpx.Client, kind: str) -> None:
    response = http.post(
        "/v1/queue.stats", content=b'{"queue_name": "known"}', headers={"Content-Type": kind}
    )
    assert response.status_code == 455
    assert response.json()["message"] == (
        f"Content-Type header '{kind}' is invalid format or unrecognized content type"
    )


def test_an_empty_long_poll_asks_to_retry(http: httpx.Client) -> None:
    name = f"empty-{secrets.token_hex(3)}"
    http.post("/v1/queues.create", json={"queue_name": name})
    response = http.post("/v1/queue.lease", json=lease(queue_name=name, request_timeout="50ms"))
    assert response.status_code == 454
    assert response.json() == {
        "code": 454,
        "code_text": "Retry Request",
        "message": "request timeout; no items are in the queue, try again",
        "details": {"type": "RequestTimeout"},
    }


def test_nothing_is_written_by_a_refused_call(http: httpx.Client) -> None:
    name = f"untouched-{secrets.token_hex(3)}"
    http.post("/v1/queues.create", json={"queue_name": name})
    bad = produce(queue_name=name, items=[{"utf8": "ok"}, {"bytes": "@@"}])
    assert http.post("/v1/queue.produce", json=bad).status_code == 400
    stats = http.post("/v1/queue.stats", json={"queue_name": name}).json()
    assert stats["logicalQueues"][0]["partitions"][0]["total"] == 0


@pytest.mark.parametrize(("path", "done"), [("complete", "completed"), ("retry", "retried")])
def test_items_not_leased_are_answered_as_querator_does(
    http: httpx.Client, path: str, done: str
) -> None:
    name = f"unleased-{secrets.token_hex(3)}"
    http.post("/v1/queues.create", json={"queue_name": name})
    produced = http.post(
        "/v1/queue.produce", json=produce(queue_name=name), headers={"Querator-Extras": "true"}
    )
    (item,) = produced.json()["ids"]
    body: dict[str, Any] = {"queue_name": name}
    body |= (
        {"ids": [item], "request_timeout": "1s"}
        if path == "complete"
        else {"items": [{"id": item}]}
    )
    response = http.post(f"/v1/queue.{path}", json=body)
    assert response.status_code == 400
    reply = response.json()
    assert reply["code_text"] == "Bad Request"
    assert reply["message"] == f"item(s) cannot be {done}; '{item}' is not marked as leased"
    assert reply["details"] == {"type": "Conflict", item: "not_leased"}
