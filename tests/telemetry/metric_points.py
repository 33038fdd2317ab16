"""Reading one instrument's points for one queue out of the in-memory metric reader."""

from __future__ import annotations

from typing import Any

from otel_sdk import Telemetry


def points(otel: Telemetry, name: str, **attributes: str) -> list[Any]:
    """The data points of instrument ``name`` whose attributes include ``attributes``."""
    data = otel.metrics.get_metrics_data()
    found: list[Any] = []
    if data is None:
        return found
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != name:
                    continue
                for point in metric.data.data_points:
                    given = dict(point.attributes or {})
                    if all(given.get(k) == v for k, v in attributes.items()):
                        found.append(point)
    return found


def value(otel: Telemetry, name: str, **attributes: str) -> float | None:
    """The one point's value (a sum or gauge) of ``name`` for ``attributes``, or None."""
    found = points(otel, name, **attributes)
    assert len(found) <= 1, found
    return found[0].value if found else None
