"""Rendering pages: the Jinja2 environment (autoescaping every value), the
template filters, and the security headers every dashboard response carries."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from jinja2 import Environment, PackageLoader, pass_context
from jinja2.runtime import Context
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Router

from querator.dashboard.session import Viewer, keep_csrf
from querator.queue.dead_reasons import source_queue
from querator.workflows.attributes import condition_text

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
"""No inline script or style, nothing from elsewhere, never framed."""
HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}
PREVIEW = 2_000
"""Characters of a payload or value shown before it is cut."""


def when(at: datetime | None) -> str:
    """An instant as ``2026-11-25 17:03:16Z`` (UTC; empty for None)."""
    return "" if at is None else at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def instant(at: datetime | None) -> str:
    """An instant's time of day to the millisecond, ``17:03:16.042`` (UTC)."""
    return "" if at is None else at.astimezone(UTC).strftime("%H:%M:%S.%f")[:-3]


def seconds(value: float | None) -> str:
    """A duration for people: ``850 ms``, ``12.3 s``, ``4 min``, ``2.5 h``."""
    if value is None:
        return ""
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    if value < 7200:
        return f"{value / 60:.0f} min"
    return f"{value / 3600:.1f} h"


def between(start: datetime | None, end: datetime | None) -> str:
    """The duration from ``start`` to ``end`` (empty when either is missing)."""
    if start is None or end is None:
        return ""
    return seconds(max(0.0, (end - start).total_seconds()))


def pretty(text: str | None) -> str:
    """Stored JSON text indented for reading (as given when it is not JSON), cut
    at :data:`PREVIEW` characters."""
    if text is None:
        return ""
    try:
        shown = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        shown = text
    return shown if len(shown) <= PREVIEW else shown[:PREVIEW] + " …"


PAYLOAD_READ = 4 * PREVIEW
"""Bytes of a payload a preview decodes at most (a big payload is never parsed whole)."""


def payload(data: bytes) -> str:
    """A payload's preview: its text when it is UTF-8 (indented JSON when it is
    JSON and short enough to parse), else its first bytes in hex."""
    head = data[:PAYLOAD_READ]
    try:
        text = head.decode()
    except UnicodeDecodeError as exc:
        if len(head) == len(data) or exc.start < len(head) - 3:
            return f"({len(data)} bytes) " + data[: PREVIEW // 2].hex()
        text = head[: exc.start].decode()  # the cut fell inside a character
    if len(head) < len(data):
        return text[:PREVIEW] + " …"
    return pretty(text)


def dom_id(value: str) -> str:
    """``value`` made safe for an element id that CSS selectors can name
    (htmx finds preserved elements by such a selector): letters, digits,
    ``-`` and ``_`` kept, every other character as ``_`` and its code point."""
    return "".join(
        c if c.isascii() and (c.isalnum() or c in "-_") else f"_{ord(c):x}" for c in value
    )


ROUTER_KEY = "querator.dashboard.router"
"""Where the dashboard's app leaves its router in the ASGI scope (for :func:`link`)."""


def link(request: Request, route: str, /, **params: Any) -> str:
    """The path of the dashboard's ``route`` (wherever the dashboard is mounted)."""
    router: Router = request.scope[ROUTER_KEY]
    root: str = request.scope.get("root_path", "")
    return root + str(router.url_path_for(route, **params))


@pass_context
def url_for(context: Context, route: str, /, **params: Any) -> str:
    """:func:`link` for templates."""
    return link(context["request"], route, **params)


ENV = Environment(
    loader=PackageLoader("querator.dashboard", "templates"), autoescape=True, auto_reload=False
)
ENV.filters.update(
    when=when,
    instant=instant,
    seconds=seconds,
    pretty=pretty,
    condition=condition_text,
    payload=payload,
    dom_id=dom_id,
    dead_source=source_queue,
)
ENV.globals.update(between=between, url_for=url_for)


def page(
    request: Request, template: str, viewer: Viewer, *, status_code: int = 200, **context: Any
) -> Response:
    """``template`` rendered for ``viewer``, with the security headers and the
    browser's CSRF cookie."""
    html = ENV.get_template(template).render(request=request, viewer=viewer, **context)
    response = HTMLResponse(html, status_code=status_code, headers=HEADERS)
    keep_csrf(response, request, viewer.csrf)
    return response
