"""One table between :mod:`querator.errors` and DUH-RPC replies.

The server turns an exception into ``(status, Reply)``; the client turns a
reply back into the same exception class with the same fields. Messages keep
Querator's ``"<constant part>; <details>"`` form; ``details`` carries what a
client needs to rebuild the exception (``type`` and its fields).
"""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from querator.errors import (
    Conflict,
    ConflictReason,
    Forbidden,
    InvalidArgument,
    LockLost,
    QueratorError,
    QueueExists,
    QueueNotEmpty,
    QueueNotFound,
    RequestTimeout,
    StoreFault,
    Unauthorized,
    Unavailable,
)
from querator.http.wire.queue import Reply
from querator.webhooks.errors import DeliveryNotFound, EndpointNotFound, MessageNotFound
from querator.workflows.errors import RunExists, RunFinished, RunNotFound

OK = 200
BAD_REQUEST = 400
UNAUTHORIZED = 401
FORBIDDEN = 403
NOT_FOUND = 404
CONFLICT = 409
REQUEST_FAILED = 453
RETRY_REQUEST = 454
CLIENT_CONTENT_ERROR = 455
INTERNAL_ERROR = 500
NOT_IMPLEMENTED = 501

CODE_TEXT = {
    OK: "OK",
    BAD_REQUEST: "Bad Request",
    UNAUTHORIZED: "Unauthorized",
    FORBIDDEN: "Forbidden",
    NOT_FOUND: "Not Found",
    CONFLICT: "Conflict",
    REQUEST_FAILED: "Request Failed",
    RETRY_REQUEST: "Retry Request",
    CLIENT_CONTENT_ERROR: "Client Content Error",
    INTERNAL_ERROR: "Internal Service Error",
    NOT_IMPLEMENTED: "Not Implemented",
}
"""DUH-RPC's words for its codes."""

REQUEST_TIMEOUT_MESSAGE = "request timeout; no items are in the queue, try again"
"""Querator's message for a long poll that found nothing."""


def reply(status: int, message: str, details: dict[str, str] | None = None) -> Reply:
    """A DUH-RPC reply."""
    text = CODE_TEXT.get(status) or HTTPStatus(status).phrase
    return Reply(code=status, code_text=text, message=message, details=details or {})


def invalid(field: str, rule: str, message: str | None = None) -> Reply:
    """400 for a bad field; ``message`` defaults to ``"<field> is invalid; <rule>"``."""
    details = {"type": "InvalidArgument", "field": field, "rule": rule}
    return reply(BAD_REQUEST, message or f"{field} is invalid; {rule}", details)


_DONE = {
    "/v1/queue.complete": "completed",
    "/v1/queue.retry": "retried",
    "/v1/queue.renew": "renewed",
}
"""What each call does to items, in Querator's conflict message."""


def conflict_message(exc: Conflict, path: str = "") -> str:
    """Querator's message for the first item that failed its check:
    ``invalid storage id; '<id>' does not exist`` or ``item(s) cannot be
    completed; '<id>' is not marked as leased`` (querator adds ``... is stale``)."""
    item, reason = next(iter(exc.reasons.items()))
    if reason is ConflictReason.MISSING:
        return f"invalid storage id; '{item}' does not exist"
    done = _DONE.get(path, "changed")
    if reason is ConflictReason.NOT_LEASED:
        return f"item(s) cannot be {done}; '{item}' is not marked as leased"
    if reason is ConflictReason.LEASED:
        return f"item(s) cannot be deleted; '{item}' is leased"
    return f"item(s) cannot be {done}; '{item}' is stale, its version has changed"


def _unavailable(exc: Unavailable) -> str:
    text = str(exc)
    return text if text == "service is shutting down" else f"store unavailable; {text}"


_SERVER_SIDE: list[tuple[type[QueratorError], int, Callable[[Any], tuple[str, dict[str, str]]]]] = [
    (
        QueueNotFound,
        BAD_REQUEST,
        lambda e: (f"queue does not exist; no such queue named '{e.queue}'", {"queue": e.queue}),
    ),
    (
        QueueExists,
        BAD_REQUEST,
        lambda e: (f"invalid queue; '{e.queue}' already exists", {"queue": e.queue}),
    ),
    (
        QueueNotEmpty,
        BAD_REQUEST,
        lambda e: (
            f"queue is not empty; '{e.queue}' holds {e.count} item(s), use force to delete it",
            {"queue": e.queue, "count": str(e.count)},
        ),
    ),
    (
        LockLost,
        CONFLICT,
        lambda e: (f"permit lost; {e}", {"name": e.name, "token": str(e.token)}),
    ),
    (RequestTimeout, RETRY_REQUEST, lambda e: (REQUEST_TIMEOUT_MESSAGE, {})),
    (Unavailable, RETRY_REQUEST, lambda e: (_unavailable(e), {})),
    (
        StoreFault,
        INTERNAL_ERROR,
        lambda e: (f"store failed; {e.reason}", {"reason": e.reason, "code": e.code or ""}),
    ),
    (Unauthorized, UNAUTHORIZED, lambda e: (str(e), {})),
    (Forbidden, FORBIDDEN, lambda e: (str(e), {})),
    (RunNotFound, REQUEST_FAILED, lambda e: (f"run does not exist; {e}", {"run_id": e.run_id})),
    (RunFinished, REQUEST_FAILED, lambda e: (f"run has ended; {e}", {"run_id": e.run_id})),
    (
        RunExists,
        CONFLICT,
        lambda e: (f"run exists; {e}", {"key": e.key, "run_id": e.run_id, "status": e.status}),
    ),
    (
        EndpointNotFound,
        REQUEST_FAILED,
        lambda e: (f"endpoint does not exist; {e}", {"endpoint_id": e.endpoint_id}),
    ),
    (
        MessageNotFound,
        REQUEST_FAILED,
        lambda e: (f"message does not exist; {e}", {"message_id": e.message_id}),
    ),
    (
        DeliveryNotFound,
        REQUEST_FAILED,
        lambda e: (f"delivery does not exist; {e}", {"delivery_id": e.delivery_id}),
    ),
]
"""Error class -> status and (message, details) of its reply."""


def error_reply(exc: QueratorError, path: str = "") -> Reply:
    """The reply for a querator error (the server side of the table) raised by
    the call at ``path``."""
    if isinstance(exc, InvalidArgument):
        return invalid(exc.field, exc.rule)
    if isinstance(exc, Conflict):  # Querator answers its conflicts with 400
        reasons = {key: reason.value for key, reason in exc.reasons.items()}
        return reply(BAD_REQUEST, conflict_message(exc, path), {"type": "Conflict", **reasons})
    for cls, code, shape in _SERVER_SIDE:
        if isinstance(exc, cls):
            message, details = shape(exc)
            return reply(code, message, {"type": cls.__name__, **details})
    return reply(REQUEST_FAILED, f"request failed; {exc}", {"type": type(exc).__name__})


def _count(body: Reply) -> int:
    text = body.details.get("count", "")
    return int(text) if text.isdigit() else 0


_CLIENT_SIDE: dict[str, Callable[[Reply], QueratorError]] = {
    "InvalidArgument": lambda r: InvalidArgument(
        r.details.get("field", "request"), r.details.get("rule", r.message)
    ),
    "QueueNotFound": lambda r: QueueNotFound(r.details.get("queue", "")),
    "QueueExists": lambda r: QueueExists(r.details.get("queue", "")),
    "QueueNotEmpty": lambda r: QueueNotEmpty(r.details.get("queue", ""), _count(r)),
    "Conflict": lambda r: Conflict(
        {key: ConflictReason(value) for key, value in r.details.items() if key != "type"}
    ),
    "RequestTimeout": lambda r: RequestTimeout(r.message),
    "LockLost": lambda r: LockLost(r.details.get("name", ""), _whole(r.details.get("token"))),
    "StoreFault": lambda r: StoreFault(
        r.details.get("reason", r.message), r.details.get("code") or None
    ),
    "Unauthorized": lambda r: Unauthorized(r.message),
    "Forbidden": lambda r: Forbidden(r.message),
    "RunNotFound": lambda r: RunNotFound(r.details.get("run_id", "")),
    "RunFinished": lambda r: RunFinished(r.details.get("run_id", "")),
    "RunExists": lambda r: RunExists(
        r.details.get("key", ""), r.details.get("run_id", ""), r.details.get("status", "")
    ),
    "EndpointNotFound": lambda r: EndpointNotFound(r.details.get("endpoint_id", "")),
    "MessageNotFound": lambda r: MessageNotFound(r.details.get("message_id", "")),
    "DeliveryNotFound": lambda r: DeliveryNotFound(r.details.get("delivery_id", "")),
}
"""The ``type`` of a reply's details -> the exception it stands for."""
_BY_STATUS: dict[int, Callable[[str], QueratorError]] = {
    BAD_REQUEST: lambda m: InvalidArgument("request", m),
    CLIENT_CONTENT_ERROR: lambda m: InvalidArgument("request", m),
    UNAUTHORIZED: Unauthorized,
    FORBIDDEN: Forbidden,
}
"""Replies without a known ``type`` (another server, a proxy) by status."""


def _whole(text: str | None) -> int:
    return int(text) if text and text.isdigit() else 0


def error_of(code: int, body: Reply) -> QueratorError:
    """The exception a reply stands for (the client side of the table)."""
    build = _CLIENT_SIDE.get(body.details.get("type", ""))
    if build is not None:
        return build(body)
    if code in _BY_STATUS:
        return _BY_STATUS[code](body.message)
    if code == RETRY_REQUEST or code >= INTERNAL_ERROR:
        return Unavailable(f"{code} {body.code_text}: {body.message}")
    return QueratorError(f"{code} {body.code_text}: {body.message}")
