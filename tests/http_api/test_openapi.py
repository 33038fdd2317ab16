"""The OpenAPI document: served at /openapi.json, generated from the models,
and true of the live server (real calls validate against it; schemathesis
fuzzes every operation: no server error, no response outside the schema)."""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema_rs
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode, checks
from schemathesis.core.result import Ok

from querator.http.endpoints import ENDPOINTS


@pytest.fixture(scope="module")
def document(server: str) -> dict[str, Any]:
    """The live server's OpenAPI document."""
    response = httpx.get(f"{server}/openapi.json", timeout=30)
    assert response.status_code == 200
    found: dict[str, Any] = response.json()
    return found


def validator(document: dict[str, Any], path: str, code: str) -> Any:
    """A JSON schema validator of ``path``'s documented ``code`` answer."""
    content = document["paths"][path]["post"]["responses"][code]["content"]
    schema = dict(content["application/json"]["schema"])
    schema["components"] = document["components"]
    return jsonschema_rs.validator_for(schema)


def test_the_document_is_openapi_3_1_of_every_endpoint(
    server: str, document: dict[str, Any]
) -> None:
    assert document["openapi"] == "3.1.0"
    assert set(document["paths"]) == {e.path for e in ENDPOINTS} | {"/health", "/metrics"}
    for endpoint in ENDPOINTS:
        operation = document["paths"][endpoint.path]["post"]
        assert operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        assert {"200", "400", "401", "403", "454", "500"} <= set(operation["responses"])
        [header] = operation["parameters"]
        assert (header["name"], header["in"]) == ("Querator-Namespace", "header")
    page = httpx.get(f"{server}/docs", timeout=30)
    assert page.status_code == 200
    assert "/openapi.json" in page.text


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("/v1/queues.create", {"queue_name": "doc-q", "lease_timeout": "30s"}),
    ("/v1/queues.info", {"queue_name": "doc-q"}),
    ("/v1/queues.list", {}),
    ("/v1/queue.produce", {"queue_name": "doc-q", "request_timeout": "5s",
                           "items": [{"utf8": "a"}, {"bytes": "Yg==", "dedup_key": "b"}]}),
    ("/v1/queue.lease", {"queue_name": "doc-q", "client_id": "c", "batch_size": 1,
                         "request_timeout": "5s"}),
    ("/v1/queue.stats", {"queue_name": "doc-q"}),
    ("/v1/queue.lookup", {"queue_name": "doc-q", "dedup_keys": ["b"]}),
    ("/v1/storage/items.list", {"queue_name": "doc-q"}),
    ("/v1/storage/scheduled.list", {"queue_name": "doc-q"}),
    ("/v1/queue.transact", {"produce": {"doc-q": [{"utf8": "c"}]}}),
    ("/v1/runs.list", {}),
    ("/v1/schedules.list", {}),
    ("/v1/queue.lease", {"queue_name": "doc-q", "client_id": "", "batch_size": 1}),
    ("/v1/queue.stats", {"queue_name": "no-such-queue"}),
    ("/v1/runs.get", {"run_id": "no-such-run"}),
    ("/v1/webhooks/endpoints.add", {"url": "https://hooks.example.invalid/in"}),
    ("/v1/webhooks/endpoints.list", {}),
    ("/v1/webhooks/messages.send", {"event_type": "doc.sent", "payload": {"n": 1}}),
    ("/v1/webhooks/failed.list", {}),
    ("/v1/webhooks/messages.get", {"message_id": "msg_none"}),
    ("/v1/webhooks/endpoints.add", {"url": "http://127.0.0.1/in"}),
]  # fmt: skip
"""Real calls (good and bad) whose answers must match the document."""
EXTRAS = {"Querator-Extras": "true"}
"""The document describes replies with querator's fields (without the header,
Querator's calls answer a subset: Querator's fields)."""


def test_live_answers_match_the_document(server: str, document: dict[str, Any]) -> None:
    for path, body in CALLS:
        response = httpx.post(f"{server}{path}", json=body, timeout=30, headers=EXTRAS)
        code = str(response.status_code)
        validator(document, path, code).validate(response.json())


@pytest.mark.timeout(300)  # ~50 s on an idle machine; twice the default under load
@pytest.mark.parametrize("webhooks", [False, True], ids=["api", "webhooks"])
def test_fuzzed_requests_get_no_server_error_and_answers_in_the_schema(
    server: str, webhooks: bool
) -> None:
    schema = schemathesis.openapi.from_url(f"{server}/openapi.json")
    results = list(schema.get_all_operations())
    operations = [result.ok() for result in results if isinstance(result, Ok)]
    assert len(operations) == len(results), "an operation of the document is invalid"
    assert len(operations) == len(ENDPOINTS) + 2
    operations = [op for op in operations if op.path.startswith("/v1/webhooks/") == webhooks]
    runs = [(op, GenerationMode.POSITIVE) for op in operations]
    runs += [(op, GenerationMode.NEGATIVE) for op in operations if op.method.upper() == "POST"]
    for operation, mode in runs:

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def fuzz(case: Any) -> None:
            case.call_and_validate(checks=CHECKS, headers=EXTRAS)

        fuzz()


CHECKS = [
    checks.not_a_server_error,
    checks.response_schema_conformance,
    checks.status_code_conformance,
    checks.content_type_conformance,
]
"""No 5xx, and every answer as documented. (Schema-valid bodies may still be
refused with 400: an unknown queue is bad input in Querator's protocol.)"""
EXAMPLES = 15
"""Examples per operation, positive and negative (73 operations x 15: 1,095
cases). The fuzz's time goes to generating cases, not to the server: it was
the suite's slowest test at 25 per operation (55 s idle, over 120 s under
load), so the count is held at what finds the schema and 5xx faults the
fuzz has found so far (all within the first ten examples of an operation)."""
