"""Querator's metrics as Prometheus text, from the OpenTelemetry SDK's own data.

``GET /metrics`` of ``querator serve`` serves the values of the very instruments
an OpenTelemetry exporter sends (the same names, converted the way every
OpenTelemetry-to-Prometheus bridge converts them: dots to underscores, the unit
as a suffix, ``_total`` on counters). It renders them with the
``opentelemetry-exporter-prometheus`` reader into a ``prometheus_client``
registry of its own.

That reader must be attached to the process's ``MeterProvider`` when the
provider is made, so :func:`install` sets the global provider when the
application set none (``querator serve`` with no SDK configured). When the
application configured its own SDK, its provider cannot take one more reader:
:func:`install` then returns None, and the application exports through its SDK
(add a ``PrometheusMetricReader`` to it to be scraped).
"""

from __future__ import annotations

import threading

from opentelemetry import metrics
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CollectorRegistry, generate_latest

from querator.telemetry.switches import metering

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The Prometheus text exposition format's content type."""


class Exposition:
    """A registry fed by a reader on the global ``MeterProvider``."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.reader = PrometheusMetricReader(
            disable_target_info=True, scope_info_enabled=False, registry=self.registry
        )

    def text(self) -> bytes:
        """Every querator instrument (and any other of the provider) as Prometheus text."""
        return generate_latest(self.registry)


_lock = threading.Lock()
_installed: list[Exposition | None] = []


def install() -> Exposition | None:
    """The process's exposition: made with the global ``MeterProvider`` when the
    application set none; None when it had set its own (once per process)."""
    with _lock:
        if not _installed and metering():
            _installed.append(None)  # the application's own SDK
        if not _installed:
            exposition = Exposition()
            provider = MeterProvider(metric_readers=[exposition.reader])
            metrics.set_meter_provider(provider)
            ours = metrics.get_meter_provider() is provider
            if not ours:
                provider.shutdown()
            _installed.append(exposition if ours else None)
        return _installed[0]
