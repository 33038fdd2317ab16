"""Error texts say what was wrong without contradicting themselves (each row
was once a message like "minimum is '10ms' but '10ms' was requested")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from querator.cli import app
from querator.errors import InvalidArgument
from querator.http.wire.types import request_timeout
from querator.queue.validation import check_duration
from querator.webhooks.endpoints import EndpointOptions

URL = "https://example.com/hook"


@pytest.mark.parametrize(
    ("call", "message", "never"),
    [
        (lambda: request_timeout(0.005), "minimum timeout is '10ms' but '5ms' was requested", ""),
        (
            lambda: request_timeout(0.00999999999),
            "minimum timeout is '10ms' but '0.00999999999s' was requested",
            "'10ms' was",
        ),
        (
            lambda: request_timeout(900.0000000001),
            "maximum timeout is '15m' but '900.0000000001s' was requested",
            "'15m0s' was",
        ),
        (
            lambda: check_duration("jitter", 1e12),
            "must be at most 31622400 seconds, got 1e+12",
            "> 0",
        ),
        (lambda: check_duration("jitter", -1), "must be > 0 seconds, got -1", "31622400"),
        (
            lambda: check_duration("x", -1, allow_zero=True),
            "must be >= 0 seconds, got -1",
            "31622400",
        ),
        (
            lambda: EndpointOptions(url=URL, rate_limit=float("nan")),
            "invalid rate_limit: Input should be a finite number",
            "less than",
        ),
        (
            lambda: EndpointOptions(url=URL, rate_limit=float("inf")),
            "invalid rate_limit: Input should be a finite number",
            "less than",
        ),
        (
            lambda: EndpointOptions(url="nope"),
            "invalid url: 'nope' must start with http:// or https://",
            "Value error",
        ),
    ],
)
def test_messages_name_what_was_wrong(call: Callable[[], object], message: str, never: str) -> None:
    with pytest.raises((InvalidArgument, ValueError)) as caught:
        call()
    assert message in str(caught.value)
    assert not never or never not in str(caught.value)


def test_the_minimum_long_poll_is_allowed() -> None:
    assert request_timeout(0.010) == 0.010  # "minimum timeout is '10ms'": 10ms is fine


def test_cli_rate_limit_nan_says_finite(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'w.db'}"
    done = CliRunner().invoke(app, ["webhooks", "add", URL, "--rate-limit", "nan", "--url", store])
    assert done.exit_code == 2
    assert "rate_limit: Input should be a finite number" in done.output
    assert "less than" not in done.output
