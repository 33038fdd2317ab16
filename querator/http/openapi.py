"""The OpenAPI 3.1 document, generated from the endpoint table and its
pydantic models (never written by hand), and the page that renders it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from querator.http.namespaces import NAMESPACE_HEADER
from querator.http.rpc import Endpoint
from querator.http.wire.queue import Reply
from querator.queue.backends.namespaces import MAX_NAMESPACE, NAMESPACE_PATTERN

REF = "#/components/schemas/{model}"
ERRORS = {
    "400": "Bad request: a field broke a rule, or an item failed its id/version/lease check.",
    "401": "No valid bearer token.",
    "403": "The token's scope does not allow this call.",
    "409": "A lock's permit was lost (querator's locks).",
    "453": "Request failed.",
    "454": "Retry request: a long poll found nothing, or the store is unavailable.",
    "455": "Client content error: the body is not JSON of this shape.",
    "500": "Internal error.",
    "501": "No such method.",
}

NAMESPACE_PARAMETER = {
    "name": NAMESPACE_HEADER,
    "in": "header",
    "required": False,
    "description": (
        "The namespace the call is for (absent: the server's own). The server serves"
        " a namespace its store holds (`querator namespaces create`); tokens are the"
        " server's, valid in every namespace it serves."
    ),
    "schema": {"type": "string", "pattern": NAMESPACE_PATTERN.pattern, "maxLength": MAX_NAMESPACE},
}
"""The ``Querator-Namespace`` header every RPC takes (:mod:`querator.http.namespaces`)."""


def _content(model: type[BaseModel]) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": REF.format(model=model.__name__)}}}


def openapi_document(endpoints: Sequence[Endpoint]) -> dict[str, Any]:
    """The document for ``endpoints``."""
    models: list[tuple[type[BaseModel], Any]] = [(Reply, "serialization")]
    for endpoint in endpoints:
        models += [(endpoint.request, "validation"), (endpoint.response, "serialization")]
    _, schemas = models_json_schema(list(dict.fromkeys(models)), ref_template=REF)
    paths: dict[str, Any] = {}
    for endpoint in endpoints:
        responses: dict[str, Any] = {
            "200": {"description": "OK", "content": _content(endpoint.response)}
        }
        responses |= {
            code: {"description": text, "content": _content(Reply)} for code, text in ERRORS.items()
        }
        paths[endpoint.path] = {
            "post": {
                "operationId": endpoint.path.removeprefix("/v1/").replace("/", "_"),
                "summary": endpoint.summary,
                "description": (endpoint.handler.__doc__ or "").strip()
                + f"\n\nScope: `{endpoint.scope}`; body at most {endpoint.max_body} bytes.",
                "parameters": [NAMESPACE_PARAMETER],
                "requestBody": {"required": True, "content": _content(endpoint.request)},
                "responses": responses,
                "security": [{"bearer": []}, {}],
            }
        }
    paths["/health"] = {
        "get": {
            "operationId": "health",
            "summary": "Health of the server and its store",
            "responses": {
                "200": {
                    "description": "Healthy",
                    "content": {"application/json": {"schema": HEALTH}},
                },
                "503": {
                    "description": "The store is unreachable",
                    "content": {"application/json": {"schema": HEALTH}},
                },
            },
        }
    }
    paths["/metrics"] = {
        "get": {
            "operationId": "metrics",
            "summary": "Queue depths, Prometheus text format",
            "responses": {
                "200": {
                    "description": "Metrics",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                }
            },
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "querator",
            "version": "1",
            "description": (
                "Querator's DUH-RPC API and querator's additions. Replies are described "
                "with querator's fields; Querator's calls send them only to a request "
                "with the header `Querator-Extras: true` (Querator's fields otherwise). "
                "Querator's calls also take and answer `application/protobuf`."
            ),
        },
        "paths": paths,
        "components": {
            "schemas": schemas.get("$defs", {}),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


HEALTH = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": ["pass", "fail"]},
        "output": {"type": "string"},
    },
    "required": ["status"],
}

DOCS_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>querator API</title></head>
<body>
<redoc spec-url="/openapi.json"></redoc>
<script src="https://cdn.redoc.ly/redoc/latest/bundles/redoc.standalone.js"></script>
<noscript>The API is described by <a href="/openapi.json">/openapi.json</a>.</noscript>
</body></html>
"""
"""``GET /docs``: ReDoc rendering ``/openapi.json`` (no build step)."""
