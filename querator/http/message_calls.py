"""The HTTP clients' calls that talk to a run: ``/v1/runs.send``,
``/v1/events.emit``, ``/v1/runs.get_event`` and ``/v1/runs.read_stream`` from Python.

:class:`AsyncMessageCalls` is mixed into :class:`querator.http.AsyncQuerator`,
:class:`MessageCalls` into :class:`querator.http.Querator`. Same arguments,
answers and errors as the library's :func:`~querator.workflows.send`,
:func:`~querator.workflows.get_event` and :func:`~querator.workflows.read_stream`
(which take the client as their first argument).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, TypeVar

from querator.http.callers import LoopOwner, Poster
from querator.http.durations import format_duration
from querator.http.wire import queue as wq
from querator.http.wire.messages import EmitReply, EventReply, StreamReply
from querator.http.wire.types import LONG_POLL_MAX, LONG_POLL_MIN
from querator.queue.validation import check_duration
from querator.workflows.events import _check_emit
from querator.workflows.messages import _check_send, check_topic
from querator.workflows.streams import StreamPage, _check_read

T = TypeVar("T")

_STREAM_WAIT = 60.0
"""The long poll of each ``read_stream`` request while iterating."""


def _wait(timeout: float) -> float:
    """A long poll's ``request_timeout`` for ``timeout`` seconds (0: none)."""
    return min(max(timeout, LONG_POLL_MIN), LONG_POLL_MAX) if timeout else 0.0


def _body(fields: dict[str, Any], wait: float) -> dict[str, Any]:
    return {**fields, "request_timeout": format_duration(wait)} if wait else fields


class AsyncMessageCalls:
    """Messages, published state and streams of runs over HTTP."""

    async def send(
        self: Poster,
        run_id: str,
        topic: str,
        value: Any,
        idempotency_key: str | None = None,
    ) -> None:
        """See :func:`querator.workflows.send`."""
        _check_send(run_id, topic, value, idempotency_key)
        body = {"run_id": run_id, "topic": topic, "value": value}
        body["idempotency_key"] = idempotency_key
        await self._post("/v1/runs.send", body, wq.Reply)

    async def emit_event(self: Poster, name: str, payload: Any) -> bool:
        """See :func:`querator.workflows.emit_event`."""
        _check_emit(name, payload)
        body = {"name": name, "payload": payload}
        return (await self._post("/v1/events.emit", body, EmitReply)).first

    async def get_event(self: Poster, run_id: str, key: str, timeout: float = 0.0) -> Any:
        """See :func:`querator.workflows.get_event` (a wait longer than 15
        minutes is cut to 15 minutes: the longest long poll)."""
        check_topic(key, "key")
        wait = _wait(check_duration("timeout", timeout, allow_zero=True))
        body = _body({"run_id": run_id, "key": key}, wait)
        return (await self._post("/v1/runs.get_event", body, EventReply, wait)).value

    async def read_stream_page(
        self: Poster, run_id: str, key: str, offset: int = 0, timeout: float = 0.0
    ) -> StreamPage:
        """See :func:`querator.workflows.read_stream_page_async`."""
        _check_read(run_id, key, offset)
        wait = _wait(check_duration("timeout", timeout, allow_zero=True))
        body = _body({"run_id": run_id, "key": key, "offset": offset}, wait)
        reply = await self._post("/v1/runs.read_stream", body, StreamReply, wait)
        return StreamPage(reply.values, reply.next_offset, reply.ended)

    def read_stream(self, run_id: str, key: str, offset: int = 0) -> AsyncIterator[Any]:
        """See :func:`querator.workflows.read_stream_async`: long polls until
        the stream is closed or its run ends."""
        _check_read(run_id, key, offset)
        return self._follow(run_id, key, offset)

    async def _follow(self, run_id: str, key: str, offset: int) -> AsyncIterator[Any]:
        while True:
            page = await self.read_stream_page(run_id, key, offset, _STREAM_WAIT)  # type: ignore[misc]
            for value in page.values:
                yield value
            if page.ended:
                return
            offset = page.next_offset


class MessageCalls:
    """:class:`AsyncMessageCalls` for sync code."""

    def send(
        self: LoopOwner, run_id: str, topic: str, value: Any, idempotency_key: str | None = None
    ) -> None:
        """See :func:`querator.workflows.send`."""
        self.call(self.aio.send, run_id, topic, value, idempotency_key)

    def emit_event(self: LoopOwner, name: str, payload: Any) -> bool:
        """See :func:`querator.workflows.emit_event`."""
        first: bool = self.call(self.aio.emit_event, name, payload)
        return first

    def get_event(self: LoopOwner, run_id: str, key: str, timeout: float = 0.0) -> Any:
        """See :func:`querator.workflows.get_event`."""
        value: Any = self.call(self.aio.get_event, run_id, key, timeout)
        return value

    def read_stream_page(
        self: LoopOwner, run_id: str, key: str, offset: int = 0, timeout: float = 0.0
    ) -> StreamPage:
        """See :meth:`AsyncMessageCalls.read_stream_page`."""
        page: StreamPage = self.call(self.aio.read_stream_page, run_id, key, offset, timeout)
        return page

    def read_stream(self, run_id: str, key: str, offset: int = 0) -> Iterator[Any]:
        """See :func:`querator.workflows.read_stream`."""
        _check_read(run_id, key, offset)
        return self._follow(run_id, key, offset)

    def _follow(self, run_id: str, key: str, offset: int) -> Iterator[Any]:
        while True:
            page = self.read_stream_page(run_id, key, offset, _STREAM_WAIT)  # type: ignore[misc]
            yield from page.values
            if page.ended:
                return
            offset = page.next_offset
