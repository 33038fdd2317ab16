"""The OpenTelemetry SDK as a test installs it: in-memory span exporter and metric reader.

A global provider can be set once per process, so the first test that asks for
telemetry installs both providers for the rest of its pytest-xdist worker and
each test starts from an empty exporter. Spans of other tests' background work
may still arrive: filter by the trace ids your own test produced.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@dataclass(frozen=True)
class Telemetry:
    """The process's SDK: every finished span and a reader of every instrument."""

    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader
    tracer_provider: TracerProvider

    def finished(self, trace_id: int | None = None) -> list[ReadableSpan]:
        """Spans finished so far (of one trace when ``trace_id`` is given)."""
        found = list(self.spans.get_finished_spans())
        if trace_id is None:
            return found
        return [s for s in found if s.context is not None and s.context.trace_id == trace_id]


_lock = threading.Lock()
_installed: list[Telemetry] = []


def install() -> Telemetry:
    """The process's in-memory SDK, installed as the global providers on first use."""
    with _lock:
        if not _installed:
            exporter = InMemorySpanExporter()
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            trace.set_tracer_provider(provider)
            reader = InMemoryMetricReader()
            metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
            _installed.append(Telemetry(exporter, reader, provider))
        _installed[0].spans.clear()
        return _installed[0]
