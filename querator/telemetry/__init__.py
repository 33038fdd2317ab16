"""OpenTelemetry for querator: one tracer, one meter, trace context in item headers.

querator only uses the OpenTelemetry *API*. Until the application configures
the SDK (a ``TracerProvider`` / ``MeterProvider``, or ``opentelemetry-instrument``)
every span and instrument here is the API's no-op, and ``inject`` writes nothing
into an item's headers, so the hot paths pay a few attribute look-ups at most.

Trace context travels in item ``headers`` under the W3C names (``traceparent``,
``tracestate``) through the globally configured propagator: a producer injects,
a consumer extracts and links (or parents) its ``process`` span to it. The
workflow engine stores a run's context with the run, so a replay on another
worker after a crash joins the same trace.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace

INSTRUMENTATION = "querator"
"""The instrumentation scope name of every tracer and meter querator uses."""

_VERSION = "0.1.0"


def tracer() -> trace.Tracer:
    """The tracer every querator span comes from (the global provider's)."""
    return trace.get_tracer(INSTRUMENTATION, _VERSION)


def meter() -> metrics.Meter:
    """The meter every querator instrument comes from (the global provider's)."""
    return metrics.get_meter(INSTRUMENTATION, _VERSION)


def inject(headers: MutableMapping[str, str], ctx: otel_context.Context | None = None) -> None:
    """Write the trace context of ``ctx`` (default: the current one) into ``headers``.

    Nothing is written when there is no valid span (no SDK configured, or no
    span open), so items produced outside any trace carry no extra headers.
    """
    if ctx is None and not trace.get_current_span().get_span_context().is_valid:
        return
    propagate.inject(headers, context=ctx)


def extract(headers: Mapping[str, str]) -> otel_context.Context | None:
    """The trace context an item's ``headers`` carry, or ``None`` when they carry none."""
    if "traceparent" not in headers:
        return None
    return propagate.extract(headers)


def span_context(headers: Mapping[str, str]) -> trace.SpanContext | None:
    """The remote span context in ``headers`` (to link a span to), or ``None``."""
    ctx = extract(headers)
    if ctx is None:
        return None
    found = trace.get_current_span(ctx).get_span_context()
    return found if found.is_valid else None


__all__ = ["INSTRUMENTATION", "extract", "inject", "meter", "span_context", "tracer"]
