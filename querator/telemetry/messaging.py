"""Queue operations as OpenTelemetry messaging spans (the messaging semantic conventions).

* ``send {queue}`` (PRODUCER) around a produce, and around the produce part of
  a transaction (one per destination queue). Its context goes into the headers
  of each produced item that does not carry a ``traceparent`` already, so the
  consumer's spans join the producer's trace.
* ``receive {queue}`` (CLIENT, as the conventions ask of a pull) for a lease that
  returned items, covering the look that found them (an empty long-poll wait
  makes no span), linked to each item's producer context.
* ``process {queue}`` (CONSUMER) around the handling of one item: the public
  :func:`process`, whose parent is the item's producer context.
* ``complete {queue}`` and ``retry {queue}`` (CLIENT, operation type
  ``settle``) around a complete or retry, and around those parts of a
  transaction (one per operation and queue), children of the current span.

With no ``TracerProvider`` configured every helper here returns after one
check (:func:`querator.telemetry.switches.tracing`): no span is started, no
attribute built, no header written, no item copied; the queue service does not
even call them then (:func:`~querator.telemetry.switches.observing`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Final, Literal, Protocol

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from querator.telemetry import extract, span_context, tracer
from querator.telemetry.switches import tracing

SYSTEM: Final = "messaging.system"
DESTINATION: Final = "messaging.destination.name"
BATCH_COUNT: Final = "messaging.batch.message_count"
MESSAGE_ID: Final = "messaging.message.id"
OPERATION_TYPE: Final = "messaging.operation.type"
OPERATION_NAME: Final = "messaging.operation.name"
CLIENT_ID: Final = "messaging.client.id"
"""Attribute names of the OpenTelemetry messaging semantic conventions."""

SYSTEM_NAME: Final = "querator"
"""The value of ``messaging.system`` on every querator span."""

_tracer = tracer()
"""Taken once: before the application sets a provider this is the API's proxy
tracer, which follows the provider set later."""


class Message(Protocol):
    """What the spans read of an item (a ``StoredItem`` or ``Leased``)."""

    @property
    def id(self) -> str:
        """The item's id."""

    @property
    def queue(self) -> str:
        """The queue the item is in."""

    @property
    def headers(self) -> Mapping[str, str]:
        """The item's headers (trace context)."""


def attributes(
    operation: Literal["send", "receive", "process", "settle"], name: str, queue: str, count: int
) -> dict[str, str | int]:
    """The messaging attributes of one span (pure: table-tested)."""
    found: dict[str, str | int] = {
        SYSTEM: SYSTEM_NAME,
        DESTINATION: queue,
        OPERATION_TYPE: operation,
        OPERATION_NAME: name,
    }
    if operation != "process":
        found[BATCH_COUNT] = count
    return found


class Sending:
    """The ``send`` spans of one produce or transaction, one per destination queue:
    a context manager (``with sending(...) as send:``) whose spans end with it."""

    def __init__(self, spans: dict[str, Span]) -> None:
        self._spans = spans

    def __enter__(self) -> Sending:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for span in self._spans.values():
            if exc is not None:
                _fail(span, exc)
            span.end()

    def carrier(self, queue: str) -> dict[str, str] | None:
        """The headers that carry ``queue``'s send span (None when not recording):
        what each item produced there gets unless it carries a ``traceparent``."""
        span = self._spans.get(queue)
        if span is None:
            return None
        found: dict[str, str] = {}
        propagate.inject(found, context=trace.set_span_in_context(span))
        return found

    def produced(self, ids: Mapping[str, Sequence[str]]) -> None:
        """Name the produced item of single-item sends (``messaging.message.id``)."""
        for queue, span in self._spans.items():
            got = ids.get(queue, ())
            if len(got) == 1:
                span.set_attribute(MESSAGE_ID, got[0])


_IDLE = Sending({})
"""What :func:`sending` returns with no SDK: no spans, nothing to end."""


def sending(operation: str, batches: Mapping[str, int]) -> Sending:
    """A ``send {queue}`` PRODUCER span per queue of ``batches`` (queue -> item
    count), started now, for a ``with`` block; they end with it, recording its error."""
    if not tracing():
        return _IDLE
    spans: dict[str, Span] = {}
    for queue, count in batches.items():
        span = _tracer.start_span(f"send {queue}", kind=SpanKind.PRODUCER)
        if not span.is_recording():
            break
        span.set_attributes(attributes("send", operation, queue, count))
        spans[queue] = span
    return Sending(spans)


def settling(settled: Mapping[str, Sequence[tuple[str, str]]]) -> Sending:
    """A ``{operation} {queue}`` CLIENT span (``messaging.operation.type`` ``settle``)
    per operation and queue of ``settled`` (``complete``/``retry`` -> the ``(queue,
    id)`` pairs settled), started now, for a ``with`` block around the store call;
    they end with it, recording its error."""
    if not tracing():
        return _IDLE
    spans: dict[str, Span] = {}
    for operation, refs in settled.items():
        by_queue: dict[str, list[str]] = {}
        for queue, item_id in refs:
            by_queue.setdefault(queue, []).append(item_id)
        for queue, ids in by_queue.items():
            span = _tracer.start_span(f"{operation} {queue}", kind=SpanKind.CLIENT)
            if not span.is_recording():
                return Sending(spans)
            span.set_attributes(attributes("settle", operation, queue, len(ids)))
            if len(ids) == 1:
                span.set_attribute(MESSAGE_ID, ids[0])
            spans[f"{operation} {queue}"] = span
    return Sending(spans)


def received(queue: str, client_id: str, items: Sequence[Message], started_ns: int) -> None:
    """Record a ``receive {queue}`` span for a lease that returned ``items``: it
    began at ``started_ns`` (the look that found them) and ends now, linked to
    each item's producer context."""
    if not tracing():
        return
    span = _tracer.start_span(f"receive {queue}", kind=SpanKind.CLIENT, start_time=started_ns)
    if not span.is_recording():
        return
    span.set_attributes(attributes("receive", "lease", queue, len(items)))
    span.set_attribute(CLIENT_ID, client_id)
    for item in items:
        found = span_context(item.headers)
        if found is not None:
            span.add_link(found)
    if len(items) == 1:
        span.set_attribute(MESSAGE_ID, items[0].id)
    span.end()


def now_ns() -> int:
    """The wall clock in nanoseconds (span timestamps)."""
    return time.time_ns()


class process(AbstractContextManager[Span]):  # used like a function: ``with process(item)``
    """A ``process {queue}`` CONSUMER span around the handling of one item.

    ``with process(item):`` or ``async with process(item):`` makes the span
    current for the block, as a child of the span that produced the item (the
    context its headers carry; of the current span when they carry none). An error that
    leaves the block is recorded on the span, which ends with the block.
    """

    def __init__(self, item: Message) -> None:
        self._item = item
        self._span: Span | None = None
        self._token: object = None

    def __enter__(self) -> Span:
        if not tracing():
            return trace.INVALID_SPAN
        item = self._item
        parent = extract(item.headers)
        span = _tracer.start_span(
            f"process {item.queue}",
            context=parent,
            kind=SpanKind.CONSUMER,
        )
        if span.is_recording():
            span.set_attributes(attributes("process", "process", item.queue, 1))
            span.set_attribute(MESSAGE_ID, item.id)
        self._span = span
        self._token = otel_context.attach(trace.set_span_in_context(span))
        return span

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        span, self._span = self._span, None
        if span is None:  # no SDK: nothing was started
            return
        otel_context.detach(self._token)  # type: ignore[arg-type]
        if exc is not None:
            _fail(span, exc)
        span.end()

    async def __aenter__(self) -> Span:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)


def _fail(span: Span, exc: BaseException) -> None:
    if span.is_recording():
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))


__all__ = [
    "Message",
    "Sending",
    "attributes",
    "now_ns",
    "process",
    "received",
    "sending",
    "settling",
]
