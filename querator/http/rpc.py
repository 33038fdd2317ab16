"""The transport of one DUH-RPC call: method, content type, body size cap,
decoding into the endpoint's model, and errors as replies.

No rule of the queue lives here: handlers call the library.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from querator.errors import QueratorError
from querator.http import status
from querator.http.encoding import (
    EXTRAS_HEADER,
    JSON,
    PROTOBUF,
    ContentError,
    Messages,
    decode,
    encode,
    mime,
    querator_fields,
    reply_type,
    wants_extras,
)
from querator.http.proto.reply_pb2 import Reply as ReplyMessage
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
    messages: Messages | None = None
    """Querator's protobuf messages of the call; None for querator's own calls
    (JSON only, every field always)."""


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
        media_type=JSON,
        headers={"X-Content-Type-Options": "nosniff"},
    )


def error_response(body: Reply) -> Response:
    """An error reply with its status, in JSON."""
    return json_response(body.code, body)


@dataclass(frozen=True)
class Answer:
    """How the replies to one request are written: the media type its
    ``Accept`` asked for, and Querator's fields only or querator's too."""

    media: str = JSON
    extras: bool = True
    messages: Messages | None = None

    @classmethod
    def to(cls, request: Request, endpoint: Endpoint | None) -> Answer:
        """The answer a request asks for (raises BadRequest, in JSON, for an
        ``Accept`` the endpoint cannot answer)."""
        messages = endpoint.messages if endpoint is not None else None
        try:
            media = reply_type(request.headers.get("accept"), endpoint is None or bool(messages))
        except ContentError as exc:
            raise BadRequest(status.reply(status.CLIENT_CONTENT_ERROR, str(exc))) from None
        extras = messages is None or wants_extras(request.headers.get(EXTRAS_HEADER))
        return cls(media, extras, messages)

    def reply(self, code: int, model: BaseModel) -> Response:
        """``model`` as the request asked for it."""
        kind = self.messages.reply if self.messages and code == status.OK else ReplyMessage
        if self.media == JSON and self.extras:
            return json_response(code, model)
        data = model.model_dump(mode="json")
        if not self.extras:
            data = querator_fields(data, kind)
        if self.media == PROTOBUF:
            content = encode(data, kind)
        else:
            content = json.dumps(data, separators=(",", ":")).encode()
        headers = {"X-Content-Type-Options": "nosniff"}
        return Response(content, status_code=code, media_type=self.media, headers=headers)

    def error(self, body: Reply) -> Response:
        """An error reply with its status."""
        return self.reply(body.code, body)


class BadRequest(Exception):
    """A request refused by the transport, already shaped as a reply."""

    def __init__(self, body: Reply) -> None:
        super().__init__(body.message)
        self.body = body


def _text(data: bytes, kind: str, endpoint: Endpoint) -> bytes:
    """The request body as JSON text, whatever its encoding."""
    if kind == PROTOBUF and endpoint.messages is not None:
        try:
            return decode(data, endpoint.messages.request)
        except ContentError as exc:
            raise BadRequest(status.reply(status.CLIENT_CONTENT_ERROR, str(exc))) from None
    return data or b"{}"


async def read_body(request: Request, endpoint: Endpoint) -> BaseModel:
    """Check the content type, read at most the cap, decode into the model."""
    header = request.headers.get("content-type", "")
    kind = mime(header)
    accepted = ("", "*/*", "application/*", JSON, PROTOBUF if endpoint.messages else JSON)
    if kind not in accepted:
        message = f"Content-Type header '{header}' is invalid format or unrecognized content type"
        raise BadRequest(status.reply(status.CLIENT_CONTENT_ERROR, message))
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > endpoint.max_body:
            message = f"request body exceeds {size_text(endpoint.max_body)} limit"
            raise BadRequest(status.reply(status.BAD_REQUEST, message))
    try:
        return endpoint.request.model_validate_json(_text(bytes(data), kind, endpoint))
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


async def call(endpoint: Endpoint, context: Any, body: BaseModel, answer: Answer) -> Response:
    """Run the handler; map querator errors (and bugs) to replies."""
    try:
        result = await endpoint.handler(context, body)
    except BadRequest as exc:
        return answer.error(exc.body)
    except QueratorError as exc:
        return answer.error(status.error_reply(exc, endpoint.path))
    except ValidationError as exc:
        return answer.error(validation_reply(exc))
    except ValueError as exc:  # a wire model's own check, run by the handler
        return answer.error(status.invalid("request", str(exc), str(exc)))
    except Exception:
        log.exception("querator: %s failed", endpoint.path)
        return answer.error(status.reply(status.INTERNAL_ERROR, "Internal Error"))
    return answer.reply(status.OK, result if result is not None else status.reply(status.OK, ""))
