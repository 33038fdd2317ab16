"""An OTLP/HTTP receiver on 127.0.0.1, as a collector would run it, for tests.

Exporters (``opentelemetry-exporter-otlp-proto-http``) in any process POST
protobuf ``ExportTraceServiceRequest`` bodies to ``{endpoint}/v1/traces``; the
receiver decodes them into :class:`ReceivedSpan` records the test can read.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as it arrived (ids as integers, like the SDK's)."""

    name: str
    service: str
    trace_id: int
    span_id: int
    parent_id: int | None
    attributes: dict[str, Any]
    status_code: int
    """``2`` is ERROR (``opentelemetry.proto.trace.v1.Status``)."""
    events: tuple[str, ...]
    start_ns: int
    end_ns: int


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind is not None else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


class Receiver:
    """The spans received so far (thread-safe)."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        """``http://127.0.0.1:PORT``: what ``OTEL_EXPORTER_OTLP_ENDPOINT`` would name."""
        self._lock = threading.Lock()
        self._spans: list[ReceivedSpan] = []

    def spans(self, trace_id: int | None = None) -> list[ReceivedSpan]:
        """Spans received (of one trace when ``trace_id`` is given), by start time."""
        with self._lock:
            found = [s for s in self._spans if trace_id is None or s.trace_id == trace_id]
        return sorted(found, key=lambda s: s.start_ns)

    def add(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        received = []
        for resource_spans in request.resource_spans:
            service = str(_attributes(resource_spans.resource.attributes).get("service.name"))
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    parent = int.from_bytes(span.parent_span_id) if span.parent_span_id else None
                    received.append(
                        ReceivedSpan(
                            name=span.name,
                            service=service,
                            trace_id=int.from_bytes(span.trace_id),
                            span_id=int.from_bytes(span.span_id),
                            parent_id=parent,
                            attributes=_attributes(span.attributes),
                            status_code=span.status.code,
                            events=tuple(event.name for event in span.events),
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                        )
                    )
        with self._lock:
            self._spans.extend(received)


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path == "/v1/traces":
                receiver.add(body)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
            else:
                answer = b""
                self.send_response(404)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            return None  # quiet

    return Handler


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    """A receiver listening on 127.0.0.1 (a free port) for the block."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(Receiver("")))
    host, port = server.server_address[:2]
    receiver = Receiver(f"http://{host!s}:{port}")
    server.RequestHandlerClass = _handler(receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
