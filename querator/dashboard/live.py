"""Live pages: a stream of server-sent events fed by the store's own wakeups.

A page that shows something live opens ``/ui/events?queue=…`` (the results
queue by default: every end of a run, cancel request and resume lands there).
The stream waits on the library's :meth:`AsyncQuerator.watch` of those queues
— LISTEN/NOTIFY on PostgreSQL, the local wakeups on SQLite and in memory — so
an open stream issues no statement at all; when a watch fires it sends
``change`` and the page re-reads the part it shows (``static/dashboard.js``).
Changes are coalesced: at most one event per :data:`COALESCE` seconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from querator.dashboard.render import HEADERS
from querator.dashboard.session import Viewer
from querator.errors import InvalidArgument
from querator.queue.waiting import Watch
from querator.workflows.keys import RESULTS_QUEUE

if TYPE_CHECKING:
    from querator.dashboard.served import Served

KEEPALIVE = 15.0
"""Seconds between comments that keep idle proxies from closing the stream."""
COALESCE = 0.25
"""Seconds a stream waits after an event before it may send the next."""
MAX_QUEUES = 8
"""Queues one stream may watch."""


async def _any(watches: list[Watch], timeout: float) -> bool:
    """Wait up to ``timeout`` for a wakeup of any of ``watches``; True if one came."""
    if len(watches) == 1:
        return await watches[0].wait(timeout)
    fired = False
    async with anyio.create_task_group() as group:

        async def one(watch: Watch) -> None:
            nonlocal fired
            if await watch.wait(timeout):
                fired = True
                group.cancel_scope.cancel()

        for watch in watches:
            group.start_soon(one, watch)
    return fired


class EventStream(Response):
    """``text/event-stream`` of ``ready`` (the watches are taken: look once), then
    ``change`` at each wakeup; it ends when the browser leaves or the server stops."""

    media_type = "text/event-stream"

    def __init__(self, state: Served, watches: list[Watch]) -> None:
        super().__init__(headers={**HEADERS, "x-accel-buffering": "no"})
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        self._state = state
        self._watches = watches

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        with anyio.CancelScope() as stopping:
            self._state.waits.add(stopping)  # cancelled when the server begins to stop
            try:
                async with anyio.create_task_group() as group:
                    group.start_soon(self._until_gone, receive, group.cancel_scope)
                    await self._events(send)
            finally:
                self._state.waits.discard(stopping)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _events(self, send: Send) -> None:
        async def event(text: str) -> None:
            await send({"type": "http.response.body", "body": text.encode(), "more_body": True})

        await event("retry: 2000\nevent: ready\ndata: \n\n")
        while not self._state.stopping:
            if await _any(self._watches, KEEPALIVE):
                await event("event: change\ndata: \n\n")
                await anyio.sleep(COALESCE)  # wakeups meanwhile fire the next wait at once
            else:
                await event(": keep-alive\n\n")

    @staticmethod
    async def _until_gone(receive: Receive, scope: anyio.CancelScope) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        scope.cancel()


async def events(request: Request, state: Served, viewer: Viewer) -> Response:
    """``/ui/events?queue=a&queue=b``: the event stream of those queues' wakeups."""
    names = request.query_params.getlist("queue") or [RESULTS_QUEUE]
    if len(names) > MAX_QUEUES:
        raise InvalidArgument("queue", f"at most {MAX_QUEUES} queues a stream, got {len(names)}")
    return EventStream(state, [state.aq.watch(name) for name in names])
