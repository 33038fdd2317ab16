"""The transport of one DUH-RPC call: method, content type, body size cap,
decoding into the endpoint's model, and errors as replies.

No rule of the queue lives here: handlers call the library.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from querator.errors import QueratorError
from querator.http import status
from querator.http.wire.queue import Reply

log = logging.getLogger("querator.http")

KB = 1_000
MB = 1_000_000

Handler = Callable[[Any, Any], Awaitable[BaseModel | None]]
"""``await handler(context, body)``: the response model, or None for a plain OK reply."""


@dataclass(frozen=True)
class Endpoint:
    """One RPC: its path, body model, handler, scope and body size cap."""

    path: str
    request: type[BaseModel]
    response: type[BaseModel]
    handler: Handler
    scope: str
    """``read``, ``write`` or ``admin``: what a token needs to call it."""
    max_body: int
    """Largest request body accepted, in bytes (as Querator's caps)."""
    summary: str


def size_text(limit: int) -> str:
    """DUH-RPC's spelling of a byte count (``256.0kB``, ``512B``, ``5.0MB``)."""
    unit = 1024 if limit % 1024 == 0 else 1000
    if limit < unit:
        return f"{limit}B"
    div, exp = unit, 0
    rest = limit // unit
    while rest >= unit:
        div *= unit
        exp += 1
        rest //= unit
    letters = "KMGTPE" if unit == 1024 else "kMGTPE"
    suffix = "iB" if unit == 1024 else "B"
    return f"{limit / div:.1f}{letters[exp]}{suffix}"


def json_response(code: int, model: BaseModel) -> Response:
    """A JSON body with DUH-RPC's headers."""
    return Response(
        model.model_dump_json(),
        status_code=code,
        media_type="application/json",
        headers={"X-Content-Type-Options": "nosniff"},
    )


def error_response(body: Reply) -> Response:
    """An error reply with its status."""
    return json_response(body.code, body)


class BadRequest(Exception):
    """A request refused by the transport, already shaped as a reply."""

    def __init__(self, body: Reply) -> None:
        super().__init__(body.message)
        self.body = body


async def read_body(request: Request, endpoint: Endpoint) -> BaseModel:
    """Check the content type, read at most the cap, decode into the model."""
    kind = request.headers.get("content-type", "")
    mime = kind.split(";")[0].split(",")[0].strip().lower()
    if mime not in ("", "*/*", "application/*", "application/json"):
        message = f"Content-Type header '{kind}' is invalid format or unrecognized content type"
        raise BadRequest(status.reply(status.CLIENT_CONTENT_ERROR, message))
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > endpoint.max_body:
            message = f"request body exceeds {size_text(endpoint.max_body)} limit"
            raise BadRequest(status.reply(status.BAD_REQUEST, message))
    try:
        return endpoint.request.model_validate_json(bytes(data) or b"{}")
    except ValidationError as exc:
        raise BadRequest(validation_reply(exc)) from None


_CONTENT_ERRORS = ("json_invalid", "json_type", "extra_forbidden", "model_type", "dict_type")


def validation_reply(exc: ValidationError) -> Reply:
    """The reply for a body that failed its model: Querator's message when a
    validator gave one (400), a content error for JSON that does not fit (455)."""
    errors = exc.errors(include_url=False)
    first = min(errors, key=lambda error: error["type"] not in _CONTENT_ERRORS)
    field = ".".join(str(part) for part in first["loc"]) or "body"
    kind = first["type"]
    if kind == "value_error":
        message = str(first["ctx"]["error"]) if "ctx" in first else first["msg"]
        return status.invalid(field, message, message)
    if kind in _CONTENT_ERRORS or kind.endswith(("_type", "_parsing")):
        message = f"proto: {field}: {first['msg']}" if field != "body" else f"proto: {first['msg']}"
        details = {"type": "InvalidArgument", "field": field, "rule": first["msg"]}
        return status.reply(status.CLIENT_CONTENT_ERROR, message, details)
    return status.invalid(field, first["msg"].lower())


async def call(endpoint: Endpoint, context: Any, body: BaseModel) -> Response:
    """Run the handler; map querator errors (and bugs) to replies."""
    try:
        result = await endpoint.handler(context, body)
    except BadRequest as exc:
        return error_response(exc.body)
    except QueratorError as exc:
        return error_response(status.error_reply(exc))
    except ValidationError as exc:
        return error_response(validation_reply(exc))
    except ValueError as exc:  # a wire model's own check, run by the handler
        return error_response(status.invalid("request", str(exc), str(exc)))
    except Exception:
        log.exception("querator: %s failed", endpoint.path)
        return error_response(status.reply(status.INTERNAL_ERROR, "Internal Error"))
    return json_response(status.OK, result if result is not None else status.reply(status.OK, ""))
