"""Trace links of the dashboard: the URL template and the trace id of a
stored trace context."""

from __future__ import annotations

import pytest

from querator.dashboard.traces import TRACE_URL_ENV, trace_id, trace_template

TRACE = "0af7651916cd43dd8448eb211c80319c"


def test_the_trace_id_comes_from_a_valid_traceparent() -> None:
    assert trace_id({"traceparent": f"00-{TRACE}-b7ad6b7169203331-01"}) == TRACE
    assert trace_id({"traceparent": f"00-{TRACE.upper()}-b7ad6b7169203331-01"}) == TRACE
    assert trace_id({}) is None
    assert trace_id({"traceparent": "00-" + "0" * 32 + "-b7ad6b7169203331-01"}) is None
    assert trace_id({"traceparent": f"00-{TRACE}-b7ad6b71-01"}) is None
    assert trace_id({"traceparent": "javascript:alert(1)"}) is None


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ("https://jaeger.example.com/trace/{trace_id}", True),
        ("http://127.0.0.1:16686/trace/{trace_id}?x=1", True),
        ("", False),
        ("https://jaeger.example.com/trace/", False),  # nowhere to put the id
        ("javascript:alert('{trace_id}')", False),
    ],
)
def test_the_template_is_an_http_url_with_the_placeholder(
    value: str, kept: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TRACE_URL_ENV, value)
    assert trace_template() == (value if kept else None)
