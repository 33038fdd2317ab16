"""Bodies of the endpoints that talk to a run: send a message, read its
published state (``get_event``) and its streams (querator's own)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from querator.http.wire.types import RequestTimeout, WireModel


class SendRequest(WireModel):
    """``/v1/runs.send``: a message to a run's mailbox (see ``send``)."""

    run_id: str
    topic: str
    """The topic a ``recv(topic)`` of the run reads."""
    value: Any = None
    """The message (any JSON value)."""
    idempotency_key: str | None = None
    """Sending again with the same key (same run and topic) is a no-op."""


class EmitRequest(WireModel):
    """``/v1/events.emit``: emit an event by name (see ``emit_event``): every
    run waiting in ``wait_for_event(name)`` wakes; later waits see it too."""

    name: str
    """1-200 letters, digits, ``.``, ``_``, ``:`` or ``-``."""
    payload: Any = None
    """The event's payload (any JSON value)."""


class EmitReply(WireModel):
    """Whether this emit stored the event."""

    first: bool
    """True: this was the first emit of the name (kept); False: the name was
    already emitted, its first payload stands (waiting runs were woken again)."""


class GetEventRequest(WireModel):
    """``/v1/runs.get_event``: the latest value a run published under ``key``,
    waiting up to ``request_timeout`` for the first one."""

    run_id: str
    key: str
    request_timeout: RequestTimeout | None = None
    """How long to wait (10ms to 15m); absent: answer at once."""


class EventReply(WireModel):
    """The value published (null when none came in time)."""

    value: Any = None


class ReadStreamRequest(WireModel):
    """``/v1/runs.read_stream``: a stream's values from ``offset``, waiting up
    to ``request_timeout`` for the first one (a long poll)."""

    run_id: str
    key: str
    offset: int = Field(default=0, ge=0)
    """How many values to skip (the ``next_offset`` of the previous answer)."""
    request_timeout: RequestTimeout | None = None
    """How long to wait (10ms to 15m); absent: answer at once."""


class StreamReply(WireModel):
    """What a stream holds from the offset asked for."""

    values: list[Any]
    """The values, in stream order (empty when none came in time)."""
    next_offset: int
    """The offset to ask for next."""
    ended: bool
    """True when no value comes after these (the stream is closed or its run ended)."""
