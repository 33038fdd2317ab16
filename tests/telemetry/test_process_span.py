"""``process(item)``: the consumer span, with ``with`` and ``async with``."""

from __future__ import annotations

import pytest
from opentelemetry.trace import StatusCode
from otel_sdk import Telemetry

from querator import AsyncQuerator, Item, Querator, telemetry
from querator.telemetry.messaging import process


@pytest.mark.anyio
async def test_async_with_continues_the_producers_trace(otel: Telemetry, qname: str) -> None:
    async with AsyncQuerator("memory://") as aq:
        await aq.create_queue(qname)
        with telemetry.tracer().start_as_current_span("producer") as producer:
            await aq.produce(qname, [Item(payload=b"a")])
        [leased] = await aq.lease(qname, client_id="w1")
        async with process(leased) as span:
            inner = telemetry.tracer().start_span("handler work")
            inner.end()
    trace_id = producer.get_span_context().trace_id
    assert span.get_span_context().trace_id == trace_id
    [work] = [s for s in otel.finished(trace_id) if s.name == "handler work"]
    assert work.parent is not None
    assert work.parent.span_id == span.get_span_context().span_id  # process is current


def test_an_error_in_the_block_is_recorded_and_raised(otel: Telemetry, qname: str) -> None:
    with Querator("memory://") as q:
        q.create_queue(qname)
        q.produce(qname, [Item(payload=b"a")])
        [leased] = q.lease(qname, client_id="w1")
        with pytest.raises(ValueError, match="bad order"), process(leased) as span:
            raise ValueError("bad order")
    trace_id = span.get_span_context().trace_id
    [found] = [s for s in otel.finished(trace_id) if s.name == f"process {qname}"]
    assert found.status.status_code is StatusCode.ERROR
    assert [e.name for e in found.events] == ["exception"]
    # produced outside any trace: the send span began one, which process continues
    [send] = [s for s in otel.finished(trace_id) if s.name == f"send {qname}"]
    assert send.parent is None and send.context is not None
    assert found.parent is not None and found.parent.span_id == send.context.span_id
