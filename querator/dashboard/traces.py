"""Links from a run's page to its trace in a tracing UI (Jaeger, Tempo,
Honeycomb…), when the server is given a URL template.

``QUERATOR_TRACE_URL`` in the server's environment names the template, with
``{trace_id}`` where the trace id goes, e.g.
``https://jaeger.example.com/trace/{trace_id}``. A run's trace id is the one
of the W3C ``traceparent`` its run record keeps (set when the run was started
inside a trace: see docs/observability.md). Without the variable, no link and
no extra read.
"""

from __future__ import annotations

import logging
import os
import re

from querator.errors import QueueNotFound
from querator.queue.service import AsyncQueueClient
from querator.workflows.keys import RESULTS_QUEUE, meta_key
from querator.workflows.stored import RunMeta

TRACE_URL_ENV = "QUERATOR_TRACE_URL"
"""The environment variable holding the tracing UI's URL template."""
PLACEHOLDER = "{trace_id}"
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}")
log = logging.getLogger("querator.dashboard")


def trace_template() -> str | None:
    """The template of ``QUERATOR_TRACE_URL``; None when unset or unusable (not
    an http(s) URL with ``{trace_id}``: logged, and no link is shown)."""
    template = os.environ.get(TRACE_URL_ENV, "").strip()
    if not template:
        return None
    if not template.startswith(("http://", "https://")) or PLACEHOLDER not in template:
        log.warning("%s must be an http(s) URL with %s; no trace links", TRACE_URL_ENV, PLACEHOLDER)
        return None
    return template


def trace_id(carrier: dict[str, str]) -> str | None:
    """The trace id of a W3C trace context (None when absent or invalid)."""
    found = _TRACEPARENT.fullmatch(carrier.get("traceparent", "").strip().lower())
    if found is None or set(found.group(1)) == {"0"}:
        return None
    return found.group(1)


async def trace_link(aq: AsyncQueueClient, run_id: str) -> str | None:
    """The tracing UI's page of run ``run_id``'s trace, when a template is set
    and the run was traced."""
    template = trace_template()
    if template is None:
        return None
    try:
        found = await aq.lookup(RESULTS_QUEUE, [meta_key(run_id)])
    except QueueNotFound:
        return None
    item = found.get(meta_key(run_id))
    if item is None:
        return None
    traced = trace_id(RunMeta.model_validate_json(item.payload).trace)
    return None if traced is None else template.replace(PLACEHOLDER, traced)
