"""Handlers of the endpoints that talk to a run: each calls the library's
function (:mod:`querator.workflows.messages`, :mod:`querator.workflows.events`,
:mod:`querator.workflows.streams`)."""

from __future__ import annotations

from typing import Any

from querator.http.wire.messages import (
    EmitReply,
    EmitRequest,
    EventReply,
    GetEventRequest,
    ReadStreamRequest,
    SendRequest,
    StreamReply,
)
from querator.http.wire.queue import Reply
from querator.workflows.events import emit_event_async
from querator.workflows.messages import get_event_async, send_async
from querator.workflows.streams import read_stream_page_async


async def send(state: Any, body: SendRequest) -> Reply:
    """Put a message in a run's mailbox (woken by this commit if it waits in ``recv``)."""
    await send_async(state.aq, body.run_id, body.topic, body.value, body.idempotency_key)
    return Reply()


async def emit(state: Any, body: EmitRequest) -> EmitReply:
    """Emit an event by name (the runs waiting for it are woken by this commit)."""
    return EmitReply(first=await emit_event_async(state.aq, body.name, body.payload))


async def get_event(state: Any, body: GetEventRequest) -> EventReply:
    """The latest value a run published under a key (a long poll for the first)."""
    value = await state.unless_stopping(
        lambda: get_event_async(state.aq, body.run_id, body.key, body.request_timeout or 0.0)
    )
    return EventReply(value=value)


async def read_stream(state: Any, body: ReadStreamRequest) -> StreamReply:
    """A stream's values from an offset (a long poll for the first)."""
    page = await state.unless_stopping(
        lambda: read_stream_page_async(
            state.aq, body.run_id, body.key, body.offset, body.request_timeout or 0.0
        )
    )
    return StreamReply(values=page.values, next_offset=page.next_offset, ended=page.ended)
