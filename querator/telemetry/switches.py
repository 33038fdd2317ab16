"""Whether the application configured the SDK: the hot paths' one check.

The API's no-op spans and instruments are cheap, but not free: a no-op span
costs microseconds, and a per-item histogram record per leased item adds up.
The queue layer asks these first and does nothing more when they say no.

The API's public question (``get_tracer_provider()``) reads the environment
on every call (2 µs); before a provider is set, the API's own module global is
still None, which these read first (0.1 µs), as the API's proxy tracer does.
A global provider can be set only once, so a yes is kept.
"""

from __future__ import annotations

from opentelemetry import metrics, trace
from opentelemetry.metrics import _internal as metrics_internal

_MISSING = object()
_tracing: list[bool] = []
_metering: list[bool] = []


def tracing() -> bool:
    """True once a real ``TracerProvider`` is the global one."""
    if _tracing:
        return True
    if getattr(trace, "_TRACER_PROVIDER", _MISSING) is None:
        return False
    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return False
    _tracing.append(True)
    return True


def metering() -> bool:
    """True once a real ``MeterProvider`` is the global one."""
    if _metering:
        return True
    if getattr(metrics_internal, "_METER_PROVIDER", _MISSING) is None:
        return False
    provider = metrics.get_meter_provider()
    if isinstance(provider, metrics.NoOpMeterProvider) or type(provider).__name__.startswith(
        ("_Proxy", "Proxy")
    ):
        return False
    _metering.append(True)
    return True


_UNSET_READABLE = hasattr(trace, "_TRACER_PROVIDER") and hasattr(
    metrics_internal, "_METER_PROVIDER"
)
"""Whether this API version keeps its providers in the globals read below (it
does since 1.0; if a version does not, :func:`observing` asks the slow way)."""


def observing() -> bool:
    """True when either is configured: the hot paths' one question, asked once per
    call (the no-SDK path then runs no other telemetry code). One call, with
    no other inside it while nothing is set."""
    if _tracing or _metering:
        return True
    if (
        _UNSET_READABLE
        and trace._TRACER_PROVIDER is None
        and metrics_internal._METER_PROVIDER is None
    ):
        return False
    return tracing() or metering()
