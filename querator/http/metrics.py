"""``GET /metrics``: querator's OpenTelemetry instruments as Prometheus text.

The gauges are read from the store for each scrape (bounded probes, see
:mod:`querator.telemetry.queue_gauges`); counters and histograms are this
server's own (the produces, leases and completes it served).
"""

from __future__ import annotations

import anyio
from starlette.responses import PlainTextResponse, Response

from querator.queue.service import AsyncQueueClient
from querator.telemetry import prometheus

NOT_HERE = (
    "# querator: this process's OpenTelemetry SDK was configured by the application;\n"
    "# its metrics go through that SDK's exporters (add a PrometheusMetricReader to it).\n"
)


async def metrics_response(aq: AsyncQueueClient) -> Response:
    """The Prometheus text of every instrument, with the gauges read now."""
    exposition = prometheus.install()
    if exposition is None:
        return PlainTextResponse(NOT_HERE, status_code=404)
    await aq.publish_gauges()
    text = await anyio.to_thread.run_sync(exposition.text)
    return Response(text, media_type=prometheus.CONTENT_TYPE)
