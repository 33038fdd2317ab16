"""Over ``querator serve``: a producer over HTTP and a consumer in-process share
one trace, and ``GET /metrics`` serves the instruments as Prometheus text."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from http_server import ROOT, serve
from otel_sdk import Telemetry
from prometheus_client.parser import text_string_to_metric_families

from querator import Item, Querator, telemetry
from querator.http import Querator as HttpQuerator
from querator.telemetry.messaging import process


@pytest.fixture
def served(pg_schema_url: str) -> Iterator[str]:
    """A server over the test's own PostgreSQL schema."""
    with serve(pg_schema_url) as url:
        yield url


def test_a_producer_over_http_and_a_consumer_in_process_share_a_trace(
    served: str, pg_schema_url: str, qname: str, otel: Telemetry
) -> None:
    with HttpQuerator(served) as http, Querator(pg_schema_url) as local:
        http.create_queue(qname)
        with telemetry.tracer().start_as_current_span("web request") as request:
            [item_id] = http.produce(qname, [Item(payload=b"order")])
        [leased] = local.lease(qname, client_id="w1")
        with process(leased):
            pass
    trace_id = request.get_span_context().trace_id
    spans = {span.name: span for span in otel.finished(trace_id)}
    assert set(spans) == {"web request", f"send {qname}", f"process {qname}"}
    send, processed = spans[f"send {qname}"], spans[f"process {qname}"]
    assert send.context is not None and processed.parent is not None
    assert processed.parent.span_id == send.context.span_id
    assert processed.attributes is not None
    assert processed.attributes["messaging.message.id"] == item_id == leased.id


def _families(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = tuple(sorted(sample.labels.items()))
            found.setdefault(sample.name, {})[labels] = sample.value
    return found


def test_metrics_serves_the_instruments_as_prometheus_text(served: str, qname: str) -> None:
    dead = f"{qname}-dead"
    with HttpQuerator(served) as http:
        http.create_queue(dead)
        http.create_queue(qname)
        http.update_queue(
            qname, http.get_queue(qname).settings.model_copy(update={"dead_queue": dead})
        )
        http.produce(qname, [Item(payload=bytes([i])) for i in range(3)])
        batch = http.lease(qname, client_id="w1", batch_size=3)
        http.complete(qname, batch[:1])
        http.retry(qname, batch[1:2], dead=True)
        response = httpx.get(f"{served}/metrics", timeout=30)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    metrics = _families(response.text)
    q = (("queue", qname),)
    assert metrics["querator_queue_produced_total"][q] == 3
    assert metrics["querator_queue_completed_total"][q] == 1
    assert metrics["querator_queue_retried_total"][q] == 1
    assert metrics["querator_queue_depth"][q] == 1
    assert metrics["querator_queue_leased"][q] == 1
    assert metrics["querator_queue_scheduled"][q] == 0
    assert metrics["querator_queue_depth"][(("queue", dead),)] == 1
    assert metrics["querator_queue_dead_letter_depth"][(("dead_queue", dead), *q)] == 1
    assert metrics["querator_queue_lease_wait_seconds_count"][q] == 3
    assert 0 <= metrics["querator_queue_oldest_age_seconds"][q] < 60
    assert re.search(r"^# TYPE querator_queue_lease_wait_seconds histogram$", response.text, re.M)


SDK_AT_STARTUP = """
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
metrics.set_meter_provider(MeterProvider())
"""


def test_metrics_says_where_they_go_when_the_application_has_its_own_sdk(
    tmp_path: Path,
) -> None:
    (tmp_path / "sitecustomize.py").write_text(SDK_AT_STARTUP)
    path = os.pathsep.join([str(ROOT), str(tmp_path)])
    with serve("memory://", env={"PYTHONPATH": path}) as url:
        response = httpx.get(f"{url}/metrics", timeout=30)
        health = httpx.get(f"{url}/health", timeout=30)
    assert health.status_code == 200
    assert response.status_code == 404
    assert "PrometheusMetricReader" in response.text
