"""A server's handling of a request joins the caller's trace (W3C ``traceparent``
request header), as an HTTP server instrumentation would make it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from opentelemetry import context as otel_context

from querator.telemetry import extract


@contextmanager
def joined(headers: Mapping[str, str]) -> Iterator[None]:
    """Make the trace context of request ``headers`` current for the block (the
    spans the block opens become children of the caller's span)."""
    parent = extract(headers)
    if parent is None:
        yield
        return
    token = otel_context.attach(parent)
    try:
        yield
    finally:
        otel_context.detach(token)
