"""The OpenTelemetry SDK as a test installs it: in-memory span exporter and metric reader.

A global provider can be set once per process, so the first test that asks for
telemetry installs both providers for the rest of its pytest-xdist worker and
each test starts from an empty exporter. Spans of other tests' background work
may still arrive: filter by the trace ids your own test produced.

Spans are sampled only while a test that asked for telemetry runs (the
``otel`` fixture switches the sampler on, and off when the test ends): the
other tests of the worker run as with no SDK, their items' headers free of
trace context, as the tests that compare headers expect.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind, TraceState
from opentelemetry.util.types import Attributes


class Switch(Sampler):
    """Samples every span while on, none while off."""

    def __init__(self) -> None:
        self.on = False

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        """RECORD_AND_SAMPLE while on, DROP while off."""
        if self.on:
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes, trace_state)
        return SamplingResult(Decision.DROP, None, trace_state)

    def get_description(self) -> str:
        """The sampler's name in the SDK's descriptions."""
        return "TestSwitch"


@dataclass(frozen=True)
class Telemetry:
    """The process's SDK: every finished span and a reader of every instrument."""

    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader
    tracer_provider: TracerProvider
    sampling: Switch
    """On while a test that asked for telemetry runs."""

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
            switch = Switch()
            provider = TracerProvider(sampler=switch)
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            trace.set_tracer_provider(provider)
            reader = InMemoryMetricReader()
            metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
            _installed.append(Telemetry(exporter, reader, provider, switch))
        _installed[0].spans.clear()
        _installed[0].sampling.on = True
        return _installed[0]
