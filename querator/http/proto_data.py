"""Protobuf messages to and from the data a wire model dumps or reads, walked
by the messages' descriptors (much faster than protobuf's JSON mapping, whose
pure-Python Timestamp parsing dominates a reply of many items)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from google.protobuf.timestamp_pb2 import Timestamp

TIMESTAMP = "google.protobuf.Timestamp"
_INTEGERS = {
    FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SINT64,
}  # fmt: skip
_BY_NAME: dict[str, dict[str, FieldDescriptor]] = {}


def field_of(descriptor: Any, name: str) -> FieldDescriptor | None:
    """A message's field by its JSON name or its own name."""
    names = _BY_NAME.get(descriptor.full_name)
    if names is None:
        names = {f.name: f for f in descriptor.fields} | {f.json_name: f for f in descriptor.fields}
        _BY_NAME[descriptor.full_name] = names
    return names.get(name)


def is_map(field: FieldDescriptor) -> bool:
    """True for a ``map<…>`` field."""
    kind = field.message_type
    return kind is not None and bool(kind.GetOptions().map_entry)


def inner(field: FieldDescriptor) -> Descriptor | None:
    """The message type of a field's values (of a map's values), if it is one
    of the protocol's messages (not a well-known type)."""
    kind = field.message_type
    if kind is None or kind.full_name.startswith("google.protobuf."):
        return None
    if is_map(field):
        return inner(kind.fields_by_name["value"])
    return kind


def to_message(data: dict[str, Any], descriptor: Any) -> Message:
    """The message of ``descriptor`` holding ``data`` (a model's JSON-mode dump:
    keys are JSON names, instants RFC 3339 text, bytes base64); None is unset.
    Raises ValueError for a key the message has not."""
    values: dict[str, Any] = {}
    for name, value in data.items():
        field = field_of(descriptor, name)
        if field is None:
            raise ValueError(f"{descriptor.full_name} has no field {name!r}")
        if value is None:
            continue
        if is_map(field):
            entry: Any = field.message_type
            values[field.name] = {
                k: _one(entry.fields_by_name["value"], v) for k, v in value.items()
            }
        elif field.is_repeated:
            values[field.name] = [_one(field, v) for v in value]
        else:
            values[field.name] = _one(field, value)
    return GetMessageClass(descriptor)(**values)


def _one(field: FieldDescriptor, value: Any) -> Any:
    kind = field.message_type
    if kind is not None and kind.full_name == TIMESTAMP:
        stamp = Timestamp()
        stamp.FromDatetime(datetime.fromisoformat(value))
        return stamp
    if kind is not None:
        return to_message(value, kind)
    if field.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64decode(value)
    if field.type in _INTEGERS:
        return int(value)
    return value


def from_message(message: Message) -> dict[str, Any]:
    """Every field of ``message`` by JSON name, for a wire model to read: unset
    fields with presence are None, others their value or default; instants
    are aware datetimes, bytes are bytes."""
    data: dict[str, Any] = {}
    descriptor: Any = message.DESCRIPTOR
    for field in descriptor.fields:
        if field.has_presence and not field.is_repeated and not message.HasField(field.name):
            data[field.json_name] = None
            continue
        value = getattr(message, field.name)
        if is_map(field):
            entry = field.message_type.fields_by_name["value"]
            data[field.json_name] = {k: _out(entry, v) for k, v in value.items()}
        elif field.is_repeated:
            data[field.json_name] = [_out(field, v) for v in value]
        else:
            data[field.json_name] = _out(field, value)
    return data


def _out(field: FieldDescriptor, value: Any) -> Any:
    kind = field.message_type
    if kind is not None and kind.full_name == TIMESTAMP:
        return value.ToDatetime(tzinfo=UTC)
    if kind is not None:
        return from_message(value)
    return value
