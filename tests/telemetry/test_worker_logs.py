"""Structured worker logs: key=value or JSON lines carrying the run, step, attempt
and trace; one line per failed attempt, with its error and traceback."""

from __future__ import annotations

import io
import json
import logging
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest
from otel_sdk import Telemetry
from worker_threads import serving

from querator import Querator, telemetry
from querator.errors import InvalidArgument
from querator.telemetry.logs import LogFormat, configure_logging, log_fields
from querator.workflows import Worker

from .flows import FLAKY, retrying


@pytest.fixture
def q() -> Iterator[Querator]:
    with Querator("memory://") as client:
        yield client


def _capture(format: LogFormat) -> tuple[io.StringIO, logging.Handler]:
    stream = io.StringIO()
    return stream, configure_logging(format, logging.INFO, stream, logger="querator")


PAIR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^ "]+)(?: |$)')


def _kv(line: str) -> dict[str, str]:
    """A key=value line as a dict (quoted values unescaped); the whole line must parse."""
    pairs = PAIR.findall(line)
    assert "".join(f"{k}={v} " for k, v in pairs).strip() == line
    return {k: json.loads(v) if v.startswith('"') else v for k, v in pairs}


def _uninstall(handler: logging.Handler) -> None:
    root = logging.getLogger("querator")
    root.removeHandler(handler)
    root.setLevel(logging.NOTSET)


def _run_flaky(q: Querator, key: str) -> tuple[str, str]:
    """Run ``flaky`` failing once; (run id, trace id of the caller's span)."""
    FLAKY[key] = 1
    with telemetry.tracer().start_as_current_span("caller") as caller:
        run = q.start(retrying, key)
    with serving(Worker(q, [retrying], poll_timeout=1.0)):
        assert run.result(timeout=20) == key
    return run.run_id, format(caller.get_span_context().trace_id, "032x")


def test_key_value_lines_carry_the_run_step_attempt_and_trace(q: Querator, otel: Telemetry) -> None:
    stream, handler = _capture("kv")
    try:
        run_id, trace_id = _run_flaky(q, "logs-kv")
    finally:
        _uninstall(handler)
    lines = stream.getvalue().splitlines()
    records = [_kv(line) for line in lines]
    assert all(set(r) >= {"time", "level", "logger", "msg"} for r in records)
    ours = [r for r in records if r.get("run_id") == run_id]
    in_step = [r for r in ours if "step" in r]
    assert {r["msg"] for r in in_step} >= {
        f"run {run_id} step tel.flaky@0: attempt 1",
        f"run {run_id} step tel.flaky@0: attempt 2",
    }
    for record in in_step:
        assert record["step"] == "tel.flaky" and record["position"] == "0"
        assert record["attempt"] in ("1", "2")
        assert record["trace_id"] == trace_id
    [failure] = [r for r in ours if r["level"] in ("WARNING", "ERROR")]
    assert failure["attempt"] == "1" and failure["logger"] == "querator.workflows"
    assert failure["error_type"] == "RuntimeError"
    assert failure["error"] == "flaky logs-kv: 1 failure(s) left"
    assert failure["traceback"].startswith("Traceback (most recent call last):")
    assert "RuntimeError: flaky logs-kv" in failure["traceback"]
    assert len(lines) == stream.getvalue().count("\n")  # one line per record


def test_json_lines(q: Querator, otel: Telemetry) -> None:
    stream, handler = _capture("json")
    try:
        run_id, trace_id = _run_flaky(q, "logs-json")
    finally:
        _uninstall(handler)
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    [failure] = [r for r in records if r.get("run_id") == run_id and r["level"] == "WARNING"]
    assert (failure["step"], failure["position"], failure["attempt"]) == ("tel.flaky", 0, 1)
    assert failure["trace_id"] == trace_id and len(failure["span_id"]) == 16
    assert "RuntimeError: flaky logs-json" in failure["traceback"]


def test_fields_and_extras_of_any_logger() -> None:
    stream = io.StringIO()
    handler = configure_logging("kv", logging.DEBUG, stream, logger="tests.logs")
    log = logging.getLogger("tests.logs")
    try:
        with log_fields(run_id="run-1", step="s"):
            log.info('a "quoted" message\non two lines', extra={"order": 7})
        log.debug("plain")
    finally:
        log.removeHandler(handler)
    first, second = stream.getvalue().splitlines()
    assert _kv(first)["msg"] == 'a "quoted" message\non two lines'
    assert (_kv(first)["run_id"], _kv(first)["step"], _kv(first)["order"]) == ("run-1", "s", "7")
    assert "run_id" not in _kv(second) and _kv(second)["level"] == "DEBUG"


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="format"):
        configure_logging("xml", stream=io.StringIO(), logger="tests.logs")  # type: ignore[arg-type]


def test_the_worker_command_refuses_an_unknown_log_format() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "querator.cli", "worker", "x.y", "--log-format", "xml"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--log-format" in done.stderr and "'xml' is not one of kv, json" in done.stderr
