"""An application module as a user would write it: its workflows, and the
OpenTelemetry SDK wired to an OTLP/HTTP collector when the module is imported
(by ``querator worker`` and ``querator start --app``).

The collector is named by ``$QUERATOR_TEST_OTLP`` (unset: no SDK) and the
process by ``$QUERATOR_TEST_SERVICE``. Spans are exported as each ends
(``SimpleSpanProcessor``), so a process killed with SIGKILL has sent every span
it finished; an application would rather use ``BatchSpanProcessor``.

Step ``xp.work`` at position 1 never returns in the process named ``worker-a``
(it touches ``{gate}.claimed`` first): the test kills that process there.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from querator.workflows import step, workflow

WORK_QUEUE = "xp.work"

_endpoint = os.environ.get("QUERATOR_TEST_OTLP")
if _endpoint:
    _provider = TracerProvider(
        resource=Resource.create({"service.name": os.environ.get("QUERATOR_TEST_SERVICE", "")})
    )
    _provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(f"{_endpoint}/v1/traces")))
    trace.set_tracer_provider(_provider)


@step(name="xp.work")
def work(n: int, gate: str) -> int:
    if n == 1 and os.environ.get("QUERATOR_TEST_SERVICE") == "worker-a":
        Path(f"{gate}.claimed").touch()
        threading.Event().wait()  # until SIGKILL
    return 10 * n


@workflow(name="xp.three", queue=WORK_QUEUE)
def three(gate: str) -> list[int]:
    return [work(0, gate), work(1, gate), work(2, gate)]
