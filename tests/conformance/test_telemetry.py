"""Messaging spans of produce -> lease -> process, and the bounded gauges, on every
backend (over HTTP too: the HTTP client makes the client-side spans itself)."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind
from otel_sdk import Telemetry

from querator import Item, Querator, telemetry
from querator.telemetry.messaging import process

from .helpers import later, make_queue

SYSTEM = {"messaging.system": "querator"}


def _one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


def test_produce_lease_process_make_one_trace(q: Querator, qname: str, otel: Telemetry) -> None:
    make_queue(q, qname)
    with telemetry.tracer().start_as_current_span("request") as request:
        ids = q.produce(qname, [Item(payload=b"a"), Item(payload=b"b")])
    trace_id = request.get_span_context().trace_id
    batch = q.lease(qname, client_id="w1", batch_size=2)
    for leased in batch:
        with process(leased):
            pass

    spans = otel.finished(trace_id)
    send = _one(spans, f"send {qname}")
    assert send.kind is SpanKind.PRODUCER
    assert send.parent is not None and send.parent.span_id == request.get_span_context().span_id
    assert dict(send.attributes or {}) == {
        **SYSTEM,
        "messaging.destination.name": qname,
        "messaging.operation.type": "send",
        "messaging.operation.name": "produce",
        "messaging.batch.message_count": 2,
    }
    assert send.context is not None
    # Each item carries the send span's context
    assert all(telemetry.span_context(i.headers) is not None for i in batch)
    assert {telemetry.span_context(i.headers).span_id for i in batch} == {  # type: ignore[union-attr]
        send.context.span_id
    }

    processed = [s for s in spans if s.name == f"process {qname}"]
    assert len(processed) == 2
    for span in processed:
        assert span.kind is SpanKind.CONSUMER
        assert span.parent is not None and span.parent.span_id == send.context.span_id
        assert span.attributes is not None
        assert span.attributes["messaging.operation.type"] == "process"
    assert {s.attributes["messaging.message.id"] for s in processed if s.attributes} == set(ids)

    receives = [
        s
        for s in otel.finished()
        if s.name == f"receive {qname}"
        and any(link.context.trace_id == trace_id for link in s.links)
    ]
    assert len(receives) == 1
    receive = receives[0]
    assert receive.kind is SpanKind.CLIENT
    assert receive.attributes is not None
    assert receive.attributes["messaging.batch.message_count"] == 2
    assert receive.attributes["messaging.client.id"] == "w1"
    assert [link.context.span_id for link in receive.links] == [send.context.span_id] * 2


def test_an_item_keeps_the_trace_context_it_was_given(
    q: Querator, qname: str, otel: Telemetry
) -> None:
    make_queue(q, qname)
    with telemetry.tracer().start_as_current_span("elsewhere") as origin:
        headers: dict[str, str] = {}
        telemetry.inject(headers)
    with telemetry.tracer().start_as_current_span("request"):
        [item_id] = q.produce(qname, [Item(payload=b"x", headers=headers)])
    [leased] = q.lease(qname, client_id="w1")
    found = telemetry.span_context(leased.headers)
    assert found is not None
    assert found.span_id == origin.get_span_context().span_id
    assert leased.id == item_id


def test_a_transaction_sends_to_each_queue(q: Querator, qname: str, otel: Telemetry) -> None:
    other = make_queue(q, f"{qname}-2")
    make_queue(q, qname)
    q.produce(qname, [Item(payload=b"first")])
    [leased] = q.lease(qname, client_id="w1")
    with telemetry.tracer().start_as_current_span("step") as step:
        result = q.transact(complete=[leased], produce={other: [Item(payload=b"next")]})
    spans = otel.finished(step.get_span_context().trace_id)
    send = _one(spans, f"send {other}")
    assert send.attributes is not None
    assert send.attributes["messaging.operation.name"] == "transact"
    assert send.attributes["messaging.message.id"] == result.produced[other][0]
    assert not [s for s in spans if s.name == f"send {qname}"]
    [moved] = q.lease(other, client_id="w1")
    assert send.context is not None
    assert telemetry.span_context(moved.headers).span_id == send.context.span_id  # type: ignore[union-attr]


def test_complete_and_retry_make_settle_spans(q: Querator, qname: str, otel: Telemetry) -> None:
    other = make_queue(q, f"{qname}-2")
    make_queue(q, qname)
    q.produce(qname, [Item(payload=b"a"), Item(payload=b"b"), Item(payload=b"c")])
    a, b, c = q.lease(qname, client_id="w1", batch_size=3)
    with telemetry.tracer().start_as_current_span("handler") as handler:
        q.complete(qname, [a, b])
        q.retry(qname, [c])
        [again] = q.lease(qname, client_id="w1")
        q.transact(complete=[again], produce={other: [Item(payload=b"next")]})
    spans = otel.finished(handler.get_span_context().trace_id)
    settles = [s for s in spans if s.name in (f"complete {qname}", f"retry {qname}")]
    assert [s.name for s in sorted(settles, key=lambda s: s.start_time or 0)] == [
        f"complete {qname}",
        f"retry {qname}",
        f"complete {qname}",
    ]
    for span in settles:
        assert span.kind is SpanKind.CLIENT
        assert span.parent is not None
        assert span.parent.span_id == handler.get_span_context().span_id
    first, retried, last = sorted(settles, key=lambda s: s.start_time or 0)
    assert dict(first.attributes or {}) == {
        **SYSTEM,
        "messaging.destination.name": qname,
        "messaging.operation.type": "settle",
        "messaging.operation.name": "complete",
        "messaging.batch.message_count": 2,
    }
    assert dict(retried.attributes or {})["messaging.message.id"] == c.id
    assert dict(last.attributes or {})["messaging.message.id"] == again.id


def test_an_empty_wait_makes_no_receive_span(q: Querator, qname: str, otel: Telemetry) -> None:
    from querator.errors import RequestTimeout

    make_queue(q, qname)
    with pytest.raises(RequestTimeout):
        q.lease(qname, client_id="w1", timeout=0.05)
    assert not [s for s in otel.finished() if s.name == f"receive {qname}"]


def test_gauges_count_depth_leased_scheduled_and_the_head_age(q: Querator, qname: str) -> None:
    make_queue(q, qname, partitions=2)
    q.produce(qname, [Item(payload=bytes([i])) for i in range(6)])
    q.produce(qname, [Item(payload=b"later", enqueue_at=later(3600))])
    leased = q.lease(qname, client_id="w1", batch_size=2)
    assert len(leased) == 2

    gauges = q.gauges(qname)
    assert (gauges.depth, gauges.leased, gauges.scheduled, gauges.exact) == (7, 2, 1, True)
    assert gauges.oldest_age is not None and 0 <= gauges.oldest_age < 60
    assert [p.partition for p in gauges.partitions] == [0, 1]


def test_gauges_count_what_was_produced_whatever_left_since(q: Querator, qname: str) -> None:
    """``produced`` counts every item ever produced into the queue: completes
    never lower it (the dashboard's throughput is its growth between samples)."""
    make_queue(q, qname, partitions=2)
    assert q.gauges(qname).produced == 0
    q.produce(qname, [Item(payload=bytes([i])) for i in range(5)])
    leased = q.lease(qname, client_id="w1", batch_size=3)
    assert leased
    q.complete(qname, leased)
    gauges = q.gauges(qname)
    assert (gauges.produced, gauges.depth) == (5, 5 - len(leased))
    assert sum(p.produced or 0 for p in gauges.partitions) == 5
    q.produce(qname, [Item(payload=b"more")])
    assert q.gauges(qname).produced == 6


def test_gauges_past_the_limit_stay_within_their_bound(q: Querator, qname: str) -> None:
    """Past ``limit`` rows a probe stops counting: depth becomes the store's
    estimate (never below the limit) and leased/scheduled saturate at it."""
    make_queue(q, qname)
    q.produce(qname, [Item(payload=bytes([i % 256])) for i in range(30)])
    q.produce(qname, [Item(payload=b"s", enqueue_at=later(3600)) for _ in range(12)])

    gauges = q.gauges(qname, limit=10)
    assert not gauges.exact
    assert gauges.depth >= 10
    assert gauges.leased + gauges.scheduled == 10
    assert gauges.scheduled == 10
    exact = q.gauges(qname, limit=100)
    assert exact.exact
    assert (exact.depth, exact.scheduled) == (42, 12)


def test_an_empty_queue_has_no_head_age(q: Querator, qname: str) -> None:
    make_queue(q, qname)
    gauges = q.gauges(qname)
    assert (gauges.depth, gauges.leased, gauges.scheduled, gauges.oldest_age) == (0, 0, 0, None)
