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
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message

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
    return json_format.ParseDict(data, kind()).SerializeToString()


_BY_NAME: dict[str, dict[str, FieldDescriptor]] = {}


def _field(descriptor: Any, name: str) -> FieldDescriptor | None:
    """A message's field by its JSON name or its own name."""
    names = _BY_NAME.get(descriptor.full_name)
    if names is None:
        names = {f.name: f for f in descriptor.fields} | {f.json_name: f for f in descriptor.fields}
        _BY_NAME[descriptor.full_name] = names
    return names.get(name)


def _is_map(field: FieldDescriptor) -> bool:
    kind = field.message_type
    return kind is not None and bool(kind.GetOptions().map_entry)


def _inner(field: FieldDescriptor) -> Descriptor | None:
    """The message type of a field's values (of a map's values), if any."""
    kind = field.message_type
    if kind is None or kind.full_name.startswith("google.protobuf."):
        return None
    if _is_map(field):
        return _inner(kind.fields_by_name["value"])
    return kind


def querator_fields(data: Any, kind: type[Message]) -> Any:
    """``data`` (JSON data of a ``kind`` message) without querator's fields
    (numbered 100 and up) and without keys the message has not."""
    return _strip(data, kind.DESCRIPTOR)


def _strip(data: Any, descriptor: Any) -> Any:
    if not isinstance(data, dict):
        return data
    kept: dict[str, Any] = {}
    for name, value in data.items():
        field = _field(descriptor, name)
        if field is None or field.number >= FIRST_EXTRA:
            continue
        inner = _inner(field)
        if inner is None:
            kept[name] = value
        elif isinstance(value, list):
            kept[name] = [_strip(v, inner) for v in value]
        elif isinstance(value, dict) and _is_map(field):
            kept[name] = {k: _strip(v, inner) for k, v in value.items()}
        else:
            kept[name] = _strip(value, inner)
    return kept


def _nones(data: dict[str, Any], descriptor: Any) -> dict[str, Any]:
    """Fill in None for the fields with presence that a message left unset."""
    for field in descriptor.fields:
        if not field.is_repeated and field.has_presence:
            data.setdefault(field.json_name, None)
        inner = _inner(field)
        value = data.get(field.json_name)
        if inner is None or value is None:
            continue
        if isinstance(value, list):
            values = value
        elif isinstance(value, dict) and _is_map(field):
            values = list(value.values())
        else:
            values = [value]
        for item in values:
            if isinstance(item, dict):
                _nones(item, inner)
    return data


def reply_data(data: bytes, kind: type[Message]) -> dict[str, Any]:
    """A protobuf reply as JSON data with every field (client side): unset
    fields with presence are None, others their defaults."""
    message = kind()
    message.ParseFromString(data)
    fields = json_format.MessageToDict(message, always_print_fields_with_no_presence=True)
    return _nones(fields, kind.DESCRIPTOR)
