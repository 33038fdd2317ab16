"""The Schedules page: every schedule with its next fire, last tick and last
run (orphans flagged), which a write token may pause, resume or trigger.

It calls :mod:`querator.workflows.cron.api`, as a Python user does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from querator.dashboard.render import link, page
from querator.dashboard.session import Viewer
from querator.workflows.cron.api import (
    list_schedules_async,
    pause_schedule_async,
    resume_schedule_async,
    trigger_schedule_async,
)

if TYPE_CHECKING:
    from querator.dashboard.served import Served


async def listing(request: Request, state: Served, viewer: Viewer) -> Response:
    """``/ui/schedules``: every schedule, by name."""
    found = sorted(await list_schedules_async(state.aq), key=lambda info: info.name)
    return page(request, "schedules.html", viewer, schedules=found)


def _back(request: Request) -> Response:
    return RedirectResponse(link(request, "schedules"), status_code=303)


async def pause(request: Request, state: Served, viewer: Viewer) -> Response:
    """Pause a schedule (its ticks are skipped until it is resumed)."""
    await pause_schedule_async(state.aq, request.path_params["name"], "paused from the dashboard")
    return _back(request)


async def resume(request: Request, state: Served, viewer: Viewer) -> Response:
    """Resume a paused schedule."""
    await resume_schedule_async(state.aq, request.path_params["name"])
    return _back(request)


async def trigger(request: Request, state: Served, viewer: Viewer) -> Response:
    """Start a run of the schedule now; its page."""
    handle = await trigger_schedule_async(state.aq, request.path_params["name"])
    return RedirectResponse(link(request, "run", run_id=handle.run_id), status_code=303)
