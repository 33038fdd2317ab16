"""``GET /v1/runs.stream``: a run's stream as server-sent events.

Query: ``run_id``, ``key``, ``offset`` (default 0; a ``Last-Event-ID`` header
wins, so a browser's ``EventSource`` resumes where it stopped). Each value is
an event whose ``data`` is the value as JSON and whose ``id`` is the offset to
resume from; an ``end`` event closes the stream when the stream is closed or
the run has ended. The reads are the library's
(:func:`querator.workflows.read_stream_page_async`): woken by the commit that
writes a value, never a database poll per client. Needs a ``read`` token.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from querator.errors import InvalidArgument, QueratorError
from querator.http import status
from querator.http.rpc import error_response
from querator.workflows.streams import _check_read, read_stream_page_async

__all__ = ["STREAM_PATH", "stream_events"]

STREAM_PATH = "/v1/runs.stream"
_SLICE = 15.0
"""Seconds one read waits before a keep-alive comment goes out."""


def _offset(request: Request) -> int:
    text = request.headers.get("last-event-id") or request.query_params.get("offset") or "0"
    if not text.isdigit():
        raise InvalidArgument("offset", f"must be a whole number >= 0, got {text[:40]!r}")
    return int(text)


async def stream_events(request: Request, state: Any) -> Response:
    """The response of ``GET /v1/runs.stream`` for the namespace's ``state``
    (the caller checked the token: a ``read`` scope)."""
    try:
        params = request.query_params
        run_id, key, offset = _check_read(params.get("run_id"), params.get("key"), _offset(request))
        first = await read_stream_page_async(state.aq, run_id, key, offset)  # RunNotFound now
    except QueratorError as exc:
        return error_response(status.error_reply(exc))

    async def events() -> AsyncIterator[str]:
        page, at = first, offset
        while True:
            for value in page.values:
                at += 1
                yield f"id: {at}\ndata: {json.dumps(value, separators=(',', ':'))}\n\n"
            if page.ended:
                yield f"id: {at}\nevent: end\ndata: {{}}\n\n"
                return
            if not page.values:
                yield ": waiting\n\n"
            try:
                page = await state.unless_stopping(
                    lambda at=at: read_stream_page_async(state.aq, run_id, key, at, _SLICE)
                )
            except QueratorError:  # the server stops, or the store is gone: the client resumes
                return

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)
