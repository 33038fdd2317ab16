"""Trace context in item headers: written only inside a span, read back as the same span."""

from __future__ import annotations

from otel_sdk import Telemetry

from querator import telemetry


def test_no_span_writes_no_headers() -> None:
    headers: dict[str, str] = {}
    telemetry.inject(headers)
    assert headers == {}
    assert telemetry.extract(headers) is None
    assert telemetry.span_context(headers) is None


def test_headers_carry_the_current_span(otel: Telemetry) -> None:
    headers: dict[str, str] = {}
    with telemetry.tracer().start_as_current_span("producer") as span:
        telemetry.inject(headers)
    assert set(headers) >= {"traceparent"}
    found = telemetry.span_context(headers)
    assert found is not None
    assert found.is_remote
    assert (found.trace_id, found.span_id) == (
        span.get_span_context().trace_id,
        span.get_span_context().span_id,
    )
    [finished] = otel.finished(found.trace_id)
    assert finished.name == "producer"
