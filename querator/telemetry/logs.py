"""Structured worker logs: one line per record, ``key=value`` or JSON.

Every line has ``time``, ``level``, ``logger`` and ``msg``; while a worker
handles a run's item it also has ``run_id``, and inside a step attempt
``step``, ``position`` and ``attempt``; with tracing on, ``trace_id`` and
``span_id`` of the current span. Fields passed with ``extra=`` are added too.
A record with an exception (a step attempt that failed) carries ``error`` and
``error_type``, and its formatted traceback in ``traceback`` (escaped, so the
record stays on one line).

querator's loggers: ``querator`` (the queue layer), ``querator.worker`` (workers
starting, stopping, poison items), ``querator.workflows`` (runs and steps: one
line per attempt and one per failed attempt), ``querator.scheduler`` and
``querator.schedules`` (cron), ``querator.webhooks``, ``querator.spark``,
``querator.http``.

``querator worker --log-format kv|json`` installs this on the root logger;
from Python, :func:`configure_logging`.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from types import MappingProxyType
from typing import IO, Any, ClassVar, Literal

from opentelemetry import trace

from querator.errors import InvalidArgument

__all__ = [
    "FORMATS",
    "ContextFilter",
    "JsonFormatter",
    "KeyValueFormatter",
    "LogFormat",
    "configure_logging",
    "log_fields",
]

LogFormat = Literal["kv", "json"]
"""``kv``: ``key=value`` pairs (values quoted when needed); ``json``: one object per line."""
FORMATS: tuple[LogFormat, ...] = ("kv", "json")

FIELDS: ContextVar[Mapping[str, object]] = ContextVar(
    "querator_log_fields", default=MappingProxyType({})
)
"""What the code running now is about (run, step, attempt): added to its log records."""

_STANDARD = frozenset(
    logging.LogRecord("", 0, "", 0, "", None, None).__dict__.keys()
    | {"message", "asctime", "taskName"}
)
"""Attributes every LogRecord has: the others came with ``extra=`` or a filter."""


class _Fields:
    __slots__ = ("fields", "token")

    def __init__(self, fields: Mapping[str, object]) -> None:
        self.fields = fields
        self.token: Token[Mapping[str, object]] | None = None

    def __enter__(self) -> None:
        self.token = FIELDS.set({**FIELDS.get(), **self.fields})

    def __exit__(self, *exc: object) -> None:
        assert self.token is not None
        FIELDS.reset(self.token)


_NOTHING = nullcontext()


def log_fields(**fields: object) -> AbstractContextManager[None]:
    """Add ``fields`` to every log record made inside (in this context and the
    threads and tasks it starts), on top of the fields already set; read by
    :class:`ContextFilter` (until one exists, this does nothing)."""
    return _Fields(fields) if ContextFilter.made else _NOTHING


class ContextFilter(logging.Filter):
    """Adds the context's fields (:func:`log_fields`) and the current span's
    trace and span ids to each record (never overriding ``extra=`` fields)."""

    made: ClassVar[bool] = False
    """True once a filter exists: until then nothing reads :func:`log_fields`' fields."""

    def __init__(self, name: str = "") -> None:
        super().__init__(name)
        ContextFilter.made = True

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in FIELDS.get().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        found = trace.get_current_span().get_span_context()
        if found.is_valid and not hasattr(record, "trace_id"):
            record.trace_id = format(found.trace_id, "032x")
            record.span_id = format(found.span_id, "016x")
        return True


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    """The record as ordered fields (the standard ones first, then the extras)."""
    stamp = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
    fields: dict[str, Any] = {
        "time": stamp.replace("+00:00", "Z"),
        "level": record.levelname,
        "logger": record.name,
        "msg": record.getMessage(),
    }
    for key, value in record.__dict__.items():
        if key not in _STANDARD and not key.startswith("_"):
            fields[key] = value
    if record.exc_info and record.exc_info[1] is not None:
        error = record.exc_info[1]
        fields.setdefault("error_type", type(error).__qualname__)
        fields.setdefault("error", str(error))
        fields["traceback"] = "".join(traceback.format_exception(error)).rstrip()
    elif record.stack_info:
        fields["stack"] = record.stack_info
    return fields


class JsonFormatter(logging.Formatter):
    """One JSON object per record (values that are not JSON types as text)."""

    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(_fields(record), default=str, ensure_ascii=False)


def _kv_value(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if text and not any(c in text for c in ' ="\\\n\r\t'):
        return text
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    escaped = escaped.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return f'"{escaped}"'


class KeyValueFormatter(logging.Formatter):
    """One line of ``key=value`` pairs per record (logfmt)."""

    def format(self, record: logging.LogRecord) -> str:
        return " ".join(f"{key}={_kv_value(value)}" for key, value in _fields(record).items())


def configure_logging(
    format: LogFormat = "kv",
    level: int | str = logging.INFO,
    stream: IO[str] | None = None,
    logger: str = "",
) -> logging.Handler:
    """Send ``logger``'s records (default: the root logger, so your steps' own
    logging too) to ``stream`` (default: stderr) as :mod:`structured lines
    <querator.telemetry.logs>`; returns the handler (remove it to undo).

    The logger's level is set to ``level``; handlers it had are kept.
    """
    if format not in FORMATS:
        raise InvalidArgument("format", f"{format!r} is not one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if format == "json" else KeyValueFormatter())
    handler.addFilter(ContextFilter())
    target = logging.getLogger(logger)
    target.addHandler(handler)
    target.setLevel(level)
    return handler
