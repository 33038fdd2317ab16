"""The Webhooks pages: endpoints with their health, the attempts of an
endpoint and of a message, failed deliveries, which a write token may re-drive
(one, the ones ticked, or all of an endpoint), and disable or enable an endpoint.

They call :class:`~querator.webhooks.AsyncWebhooks`, as a Python user does.
A store where webhooks were never used shows empty pages: a page creates no
queue (the webhook queues appear with the first endpoint).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from querator.dashboard.render import link, page
from querator.dashboard.session import Viewer
from querator.errors import InvalidArgument, QueueNotFound
from querator.webhooks import AsyncWebhooks, Attempt, EndpointNotFound, MessageNotFound, Outcome
from querator.webhooks.layout import ENDPOINTS

if TYPE_CHECKING:
    from querator.dashboard.served import Served

ATTEMPTS_SHOWN = 100
"""Newest attempts an endpoint's page reads (its health is computed over them)."""
FAILED_SHOWN = 100
"""Failed deliveries a page lists (oldest first)."""
PICKED_MAX = 500
"""Deliveries one re-drive of ticked rows may name."""


@dataclass(frozen=True)
class Health:
    """An endpoint's health over its newest attempts."""

    attempts: int
    delivered: int
    success_rate: float | None
    """Delivered / attempts (None without attempts)."""
    median_ms: float | None
    p95_ms: float | None
    last_error: str
    """The newest failed attempt's error or status (empty when none failed)."""
    last_error_at: datetime | None


def health(attempts: list[Attempt]) -> Health:
    """The health shown for ``attempts`` (newest first)."""
    delivered = sum(1 for a in attempts if a.outcome == Outcome.DELIVERED)
    latencies = sorted(a.latency_ms for a in attempts)
    failed = next((a for a in attempts if a.outcome != Outcome.DELIVERED), None)
    last_error = ""
    if failed is not None:
        status = f"HTTP {failed.status_code}" if failed.status_code is not None else ""
        last_error = ": ".join(part for part in (status, failed.error) if part) or failed.outcome
    return Health(
        attempts=len(attempts),
        delivered=delivered,
        success_rate=delivered / len(attempts) if attempts else None,
        median_ms=statistics.median(latencies) if latencies else None,
        p95_ms=latencies[min(len(latencies) - 1, round(0.95 * (len(latencies) - 1)))]
        if latencies
        else None,
        last_error=last_error,
        last_error_at=failed.at if failed is not None else None,
    )


async def _hooks(state: Served) -> AsyncWebhooks | None:
    """The store's webhooks, or None when it never had an endpoint (no queue
    is created by looking)."""
    try:
        await state.aq.get_queue(ENDPOINTS)
    except QueueNotFound:
        return None
    return AsyncWebhooks(state.aq)


async def listing(request: Request, state: Served, viewer: Viewer) -> Response:
    """``/ui/webhooks``: every endpoint and the failed deliveries."""
    hooks = await _hooks(state)
    endpoints = await hooks.list_endpoints() if hooks else []
    failed = await hooks.failed(limit=FAILED_SHOWN) if hooks else []
    return page(request, "webhooks.html", viewer, endpoints=endpoints, failed=failed)


async def endpoint(request: Request, state: Served, viewer: Viewer) -> Response:
    """``/ui/webhooks/endpoints/{endpoint_id}``: one endpoint, its health, newest
    attempts and failed deliveries."""
    endpoint_id = request.path_params["endpoint_id"]
    hooks = await _hooks(state)
    if hooks is None:
        raise EndpointNotFound(endpoint_id)
    found = await hooks.get_endpoint(endpoint_id)
    attempts = await hooks.attempts(endpoint_id=endpoint_id, limit=ATTEMPTS_SHOWN)
    failed = await hooks.failed(endpoint_id=endpoint_id, limit=FAILED_SHOWN)
    return page(
        request,
        "webhook.html",
        viewer,
        endpoint=found,
        attempts=attempts,
        health=health(attempts),
        failed=failed,
    )


async def message(request: Request, state: Served, viewer: Viewer) -> Response:
    """``/ui/webhooks/messages/{message_id}``: a message and every attempt of it."""
    message_id = request.path_params["message_id"]
    hooks = await _hooks(state)
    if hooks is None:
        raise MessageNotFound(message_id)
    found = await hooks.get_message(message_id)
    attempts = await hooks.attempts(message_id=message_id, limit=10_000)
    return page(request, "webhook_message.html", viewer, message=found, attempts=attempts)


def _back(request: Request) -> Response:
    endpoint_id = request.state.form.get("endpoint")
    if isinstance(endpoint_id, str) and endpoint_id:
        return RedirectResponse(
            link(request, "webhook_endpoint", endpoint_id=endpoint_id), status_code=303
        )
    return RedirectResponse(link(request, "webhooks"), status_code=303)


async def redrive(request: Request, state: Served, viewer: Viewer) -> Response:
    """Re-drive the ticked failed deliveries (``id`` fields), or every failed
    delivery of an endpoint (``all`` with ``endpoint``)."""
    form = request.state.form
    ids = [str(v) for v in form.getlist("id")]
    hooks = AsyncWebhooks(state.aq)
    endpoint_id = form.get("endpoint")
    if "all" in ids:
        if not isinstance(endpoint_id, str) or not endpoint_id:
            raise InvalidArgument("endpoint", "re-driving all needs the endpoint")
        await hooks.redrive(endpoint_id=endpoint_id)
    else:
        if len(ids) > PICKED_MAX:
            raise InvalidArgument("id", f"at most {PICKED_MAX} deliveries at once")
        for delivery_id in ids:
            await hooks.redrive(delivery_id)
    return _back(request)


async def disable(request: Request, state: Served, viewer: Viewer) -> Response:
    """Stop delivering to the endpoint (its due deliveries are dead-lettered)."""
    endpoint_id = request.path_params["endpoint_id"]
    await AsyncWebhooks(state.aq).disable_endpoint(endpoint_id, "disabled from the dashboard")
    return RedirectResponse(
        link(request, "webhook_endpoint", endpoint_id=endpoint_id), status_code=303
    )


async def enable(request: Request, state: Served, viewer: Viewer) -> Response:
    """Deliver to the endpoint again."""
    endpoint_id = request.path_params["endpoint_id"]
    await AsyncWebhooks(state.aq).enable_endpoint(endpoint_id)
    return RedirectResponse(
        link(request, "webhook_endpoint", endpoint_id=endpoint_id), status_code=303
    )
