"""Bulk actions on runs: cancel or resume the ticked runs, or cancel, resume or
retry the failed compensation of every run a filter selects (after a page
that says how many).

Each run is changed as a Python user changes it (``RunHandle.cancel``,
``RunHandle.retry_compensation``,
:func:`~querator.workflows.rerun.resume_async`), one at a time; the list
then says how many were done and how many could not be.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from querator.dashboard.render import link, page
from querator.dashboard.run_filters import Filters, page_of_runs
from querator.dashboard.session import Viewer
from querator.errors import Conflict, InvalidArgument
from querator.workflows.errors import RunNotFound
from querator.workflows.rerun import resume_async
from querator.workflows.runs import AsyncRunHandle

if TYPE_CHECKING:
    from querator.dashboard.served import Served

PICKED_MAX = 200
"""Runs one action on ticked rows may name."""
MATCHING_MAX = 1_000
"""Runs one action on everything a filter selects changes at most (the newest)."""
ACTIONS = {
    "cancel": ("running",),
    "resume": ("failed", "cancelled"),
    "retry": ("compensation_failed",),
}
"""Each action and the statuses it applies to."""


async def _apply(state: Served, action: str, run_ids: list[str]) -> tuple[int, int]:
    """Cancel or resume each run; (done, could not be)."""
    ok = failed = 0
    for run_id in run_ids:
        try:
            handle = AsyncRunHandle(state.aq, run_id)
            if action == "cancel":
                done = await handle.cancel("cancelled from the dashboard")
            elif action == "retry":
                done = await handle.retry_compensation()
            else:
                done = await resume_async(state.aq, run_id)
        except (InvalidArgument, Conflict, RunNotFound):  # a saga, a race, a stranger
            done = False
        ok, failed = (ok + 1, failed) if done else (ok, failed + 1)
    return ok, failed


def _to_list(request: Request, filters: Filters, action: str, ok: int, failed: int) -> Response:
    """Back to the list (its filters only), saying what was done."""
    query = filters.query(done=action, ok=str(ok), failed=str(failed))
    return RedirectResponse(f"{link(request, 'runs')}?{query}", status_code=303)


def _back(request: Request) -> Filters:
    """The filters of the list a form was on."""
    back = request.state.form.get("back")
    return Filters.of(QueryParams(back if isinstance(back, str) else ""))


def _picked(request: Request) -> list[str]:
    ids = list(dict.fromkeys(str(v) for v in request.state.form.getlist("id")))
    if len(ids) > PICKED_MAX:
        raise InvalidArgument("id", f"at most {PICKED_MAX} runs at once, got {len(ids)}")
    return ids


async def cancel_picked(request: Request, state: Served, viewer: Viewer) -> Response:
    """Ask every ticked run to end as cancelled (those already ended are counted apart)."""
    ok, failed = await _apply(state, "cancel", _picked(request))
    return _to_list(request, _back(request), "cancel", ok, failed)


async def resume_picked(request: Request, state: Served, viewer: Viewer) -> Response:
    """Resume every ticked run that failed or was cancelled."""
    ok, failed = await _apply(state, "resume", _picked(request))
    return _to_list(request, _back(request), "resume", ok, failed)


def _action(request: Request, filters: Filters) -> str:
    action = str(request.path_params["action"])
    if action not in ACTIONS:
        raise InvalidArgument("action", f"must be one of {sorted(ACTIONS)}, got {action!r}")
    if filters.status is None or filters.status not in ACTIONS[action]:
        wanted = ACTIONS[action]
        raise InvalidArgument("status", f"{action} applies to runs filtered by status {wanted}")
    return action


async def _matching(state: Served, filters: Filters) -> list[str]:
    runs = await page_of_runs(state.aq, filters, None, MATCHING_MAX)
    return [run.run_id for run in runs]


async def confirm_matching(request: Request, state: Served, viewer: Viewer) -> Response:
    """``/ui/runs/all/{action}?<filters>``: how many runs the action would change."""
    filters = Filters.of(request.query_params)
    action = _action(request, filters)
    run_ids = await _matching(state, filters)
    return page(
        request,
        "runs_confirm.html",
        viewer,
        action=action,
        filters=filters,
        count=len(run_ids),
        capped=len(run_ids) == MATCHING_MAX,
    )


async def act_on_matching(request: Request, state: Served, viewer: Viewer) -> Response:
    """Cancel or resume every run the filters select now (the newest
    :data:`MATCHING_MAX`)."""
    filters = _back(request)
    action = _action(request, filters)
    ok, failed = await _apply(state, action, await _matching(state, filters))
    return _to_list(request, filters, action, ok, failed)
