"""The two encodings of a DUH-RPC body, JSON and protobuf, and Querator's
fields versus querator's.

A request's ``Content-Type`` says how its body is encoded; its ``Accept`` says
how the reply is to be (as DUH-RPC: none, ``*/*``, ``application/*`` and
``application/json`` mean JSON). Protobuf bodies are turned into the same JSON
data the JSON path reads, so one set of models and validators serves both.

On Querator's endpoints the reply carries Querator's fields only, unless the
request has ``Querator-Extras: true``: fields numbered 100 and up in the
``.proto`` files are querator's additions, and a client built from Querator's
definitions refuses unknown JSON fields.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from querator.http.proto_data import field_of, from_message, inner, is_map, to_message

JSON = "application/json"
PROTOBUF = "application/protobuf"
EXTRAS_HEADER = "Querator-Extras"
"""The request header that asks for querator's fields beside Querator's."""
FIRST_EXTRA = 100
"""Fields numbered from here on are querator's, not Querator's."""

_JSON_NAMES = ("", "*/*", "application/*", JSON)


@dataclass(frozen=True)
class Messages:
    """The protobuf messages of one endpoint's request and reply."""

    request: type[Message]
    reply: type[Message]


class ContentError(ValueError):
    """A body or header that no encoding of the endpoint accepts."""


def mime(header: str | None) -> str:
    """The media type of a header, without parameters or alternatives."""
    return (header or "").split(";")[0].split(",")[0].strip().lower()


def wants_extras(value: str | None) -> bool:
    """True when the ``Querator-Extras`` header asks for querator's fields."""
    return (value or "").strip().lower() in ("1", "true", "yes")


def reply_type(accept: str | None, protobuf: bool) -> str:
    """The media type of the reply a request's ``Accept`` asks for."""
    kind = mime(accept)
    if kind in _JSON_NAMES:
        return JSON
    if kind == PROTOBUF and protobuf:
        return PROTOBUF
    supported = f"{JSON},{PROTOBUF}" if protobuf else JSON
    raise ContentError(
        f"Accept header '{kind}' is invalid format or unrecognized content type, "
        f"only [{supported}] are supported by this method"
    )


def json_text(message: Message) -> bytes:
    """A decoded protobuf message as the JSON text the JSON path reads."""
    return json.dumps(json_format.MessageToDict(message)).encode()


def decode(data: bytes, kind: type[Message]) -> bytes:
    """A protobuf body as JSON text (raises ContentError when it is not ``kind``)."""
    message = kind()
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        raise ContentError(f"proto: cannot parse invalid wire-format data; {exc}") from None
    return json_text(message)


def encode(data: Any, kind: type[Message]) -> bytes:
    """JSON data (as a model dumps it) as a protobuf message of ``kind``."""
    return to_message(data, kind.DESCRIPTOR).SerializeToString()


def querator_fields(data: Any, kind: type[Message]) -> Any:
    """``data`` (JSON data of a ``kind`` message) without querator's fields
    (numbered 100 and up) and without keys the message has not."""
    return _strip(data, kind.DESCRIPTOR)


def _strip(data: Any, descriptor: Any) -> Any:
    if not isinstance(data, dict):
        return data
    kept: dict[str, Any] = {}
    for name, value in data.items():
        field = field_of(descriptor, name)
        if field is None or field.number >= FIRST_EXTRA:
            continue
        kind = inner(field)
        if kind is None:
            kept[name] = value
        elif isinstance(value, list):
            kept[name] = [_strip(v, kind) for v in value]
        elif isinstance(value, dict) and is_map(field):
            kept[name] = {k: _strip(v, kind) for k, v in value.items()}
        else:
            kept[name] = _strip(value, kind)
    return kept


def reply_data(data: bytes, kind: type[Message]) -> dict[str, Any]:
    """A protobuf reply as data with every field, for the reply's model to read
    (client side): unset fields with presence are None, others their defaults."""
    return from_message(kind.FromString(data))
