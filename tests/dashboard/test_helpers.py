"""Pure helpers of the dashboard's pages: trace links (the URL template, the
trace id of a stored trace context) and the start times the sparklines read
from run-index keys."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from querator.dashboard.traces import TRACE_URL_ENV, trace_id, trace_template
from querator.workflows.run_index import entry_key, entry_started_at, facet_prefix

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


def test_an_index_entry_gives_back_its_run_start() -> None:
    started = datetime(2026, 11, 25, 22, 13, 5, 123456, tzinfo=UTC)
    key = entry_key(facet_prefix("shop.checkout", "completed"), "run-1", started)
    assert entry_started_at(key) == started
    assert entry_started_at("index/st/completed/not-a-stamp/run-1") is None
