"""Field types of the wire protocol: Go durations, base64 bytes, RFC 3339
instants and queue names checked with Querator's messages.

Validators raise ``ValueError`` with Querator's ``"<constant part>; <details>"``
text; the server answers them with 400 and that text as the message.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainSerializer,
    WithJsonSchema,
)

from querator.http.durations import PATTERN, format_duration, parse_duration

MAX_NAME = 512
"""The longest queue name Querator accepts."""
LONG_POLL_MAX = 15 * 60.0
"""The longest ``request_timeout`` (Querator: 15 minutes)."""
LONG_POLL_MIN = 0.010
"""``request_timeout`` must be longer than this (Querator: 10 ms)."""


class WireModel(BaseModel):
    """Base of every request and response body: unknown fields are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _duration(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)  # built in Python (a response), not read from JSON text
    else:
        seconds = parse_duration(value if isinstance(value, str) else repr(value))
    if not math.isfinite(seconds):
        raise ValueError("must be a finite duration")
    return seconds


Duration = Annotated[
    float,
    BeforeValidator(_duration),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema({"type": "string", "pattern": PATTERN, "examples": ["30s", "1m30s"]}),
]
"""Seconds, written as a Go duration string: ``"30s"``, ``"1m30s"``, ``"250ms"``."""


def _b64(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if not isinstance(value, str):
        raise ValueError("must be a base64 string")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise ValueError(f"is not valid base64; {exc}") from None


Base64 = Annotated[
    bytes,
    BeforeValidator(_b64),
    PlainSerializer(lambda raw: base64.b64encode(raw).decode("ascii"), return_type=str),
    WithJsonSchema({"type": "string", "contentEncoding": "base64"}),
]
"""Bytes, written as standard base64 (as protobuf JSON writes ``bytes``)."""

Instant = AwareDatetime
"""A timezone-aware instant, written in RFC 3339."""


def name_problem(label: str, value: str) -> str | None:
    """Querator's message for a name it refuses, or None."""
    if len(value) > MAX_NAME:
        return f"{label} is invalid; cannot be greater than '{MAX_NAME}' characters"
    if not value.strip():
        return f"{label} is invalid; {label} cannot be empty"
    if re.search(r"\s", value):
        return f"{label} is invalid; '{value}' cannot contain whitespace"
    if "~" in value:
        return f"{label} is invalid; '{value}' cannot contain '~' character"
    return None


def _checked(label: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        problem = name_problem(label, value)
        if problem is not None:
            raise ValueError(problem)
        return value

    return check


QueueName = Annotated[str, AfterValidator(_checked("queue name"))]
"""A queue name, refused with Querator's messages when empty, spaced, ``~`` or too long."""


def request_timeout(value: float | None) -> float:
    """Querator's checks of a long poll's ``request_timeout``."""
    if not value:
        raise ValueError("request timeout is required; '5m' is recommended, 15m is the maximum")
    if value > LONG_POLL_MAX:
        raise ValueError(
            "request timeout is invalid; maximum timeout is '15m' but "
            f"'{_requested(value, LONG_POLL_MAX)}' was requested"
        )
    if value < LONG_POLL_MIN:
        raise ValueError(
            "request timeout is invalid; minimum timeout is '10ms' but "
            f"'{_requested(value, LONG_POLL_MIN)}' was requested"
        )
    return value


def _requested(value: float, bound: float) -> str:
    """``value`` as a duration, spelled apart from ``bound`` even where it rounds to
    the same nanoseconds (``0.00999999999s``, never ``10ms`` beside a minimum of 10ms)."""
    text = format_duration(value)
    return text if text != format_duration(bound) else f"{value!r}s"


def _timeout(value: object) -> float:
    try:
        return _duration(value)
    except ValueError as exc:
        raise ValueError(
            f"request timeout is invalid; {exc} - expected format: 900ms, 5m or 15m"
        ) from None


RequestTimeout = Annotated[
    float,
    BeforeValidator(lambda v: 0.0 if v in (None, "") else _timeout(v)),
    AfterValidator(request_timeout),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema({"type": "string", "pattern": PATTERN, "examples": ["30s"]}),
]
"""A required Go duration above 10 ms and at most 15 minutes."""


def dump(model: BaseModel) -> dict[str, Any]:
    """A response model as JSON-ready data."""
    return model.model_dump(mode="json")
