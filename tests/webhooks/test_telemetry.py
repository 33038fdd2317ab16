"""A webhook message's delivery attempts in the sender's trace, and the
delivery instruments by outcome."""

from __future__ import annotations

from otel_sdk import Telemetry
from polling import wait_for
from telemetry.metric_points import points, value

from querator import telemetry
from querator.webhooks import DeliveryWorker, Outcome, Webhooks
from querator.webhooks.layout import DELIVERIES
from webhooks.helpers import until_len
from webhooks.http_receiver import Receiver


def _deliveries(otel: Telemetry, outcome: str) -> float:
    return value(otel, "querator.webhook.deliveries", outcome=outcome) or 0


def test_each_attempt_is_a_process_span_in_the_senders_trace(
    otel: Telemetry, hooks: Webhooks, worker: DeliveryWorker, receiver: Receiver
) -> None:
    before = {o: _deliveries(otel, o) for o in ("retrying", "delivered")}
    [latency_before] = points(otel, "querator.webhook.delivery.duration", outcome="delivered") or [
        None
    ]
    hooks.add_endpoint(receiver.url("flaky/2"))
    with telemetry.tracer().start_as_current_span("checkout") as checkout:
        message = hooks.send("a.b", {"x": 1})
    log = until_len(lambda: hooks.attempts(message_id=message.id), 3)
    assert [a.outcome for a in log] == [Outcome.RETRYING, Outcome.RETRYING, Outcome.DELIVERED]

    trace_id = checkout.get_span_context().trace_id
    name = f"process {DELIVERIES}"
    wait_for(lambda: len([s for s in otel.finished(trace_id) if s.name == name]) == 3)
    spans = otel.finished(trace_id)
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    for span in (s for s in spans if s.name == name):
        assert span.parent is not None
        parent = by_id[span.parent.span_id]
        assert parent.name == f"send {DELIVERIES}"  # the send that produced this attempt

    wait_for(lambda: _deliveries(otel, "delivered") == before["delivered"] + 1)
    assert _deliveries(otel, "retrying") == before["retrying"] + 2
    [latency] = points(otel, "querator.webhook.delivery.duration", outcome="delivered")
    assert latency.count == (latency_before.count if latency_before else 0) + 1
