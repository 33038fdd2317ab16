"""The Runs pages: the list (filters in the URL, newest first, paged through
the run index, counts by status) and a run's detail, with cancel and resume.

Everything is read with :func:`~querator.workflows.inspection.list_runs_async`
and :func:`~querator.workflows.inspection.get_run_async`, and changed with
the run handle's ``cancel`` and :func:`~querator.workflows.rerun.resume_async`:
what a Python user calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, get_args
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from querator.dashboard.published import SHOWN, published
from querator.dashboard.render import link, page
from querator.dashboard.run_filters import Filters, counts, page_of_runs
from querator.dashboard.session import Viewer
from querator.dashboard.sparklines import sparklines
from querator.dashboard.timeline import SCALE, lanes
from querator.dashboard.traces import trace_link
from querator.errors import InvalidArgument
from querator.workflows.attempts import run_attempts_async
from querator.workflows.inspection import (
    RunInfo,
    get_run_async,
    run_infos_async,
)
from querator.workflows.keys import PROGRESS_WAKE, RESULTS_QUEUE, child_run_id
from querator.workflows.rerun import fork_async, resume_async
from querator.workflows.runs import AsyncRunHandle, RunStatus

if TYPE_CHECKING:
    from querator.dashboard.served import Served

PAGE = 50
"""Runs a page lists."""
CHILD_WINDOW = 64
"""Positions past a run's last known step call probed for child runs."""
CHILD_POSITIONS = 2_000
"""Positions probed for child runs at most."""


async def home(request: Request, state: Served, viewer: Viewer) -> Response:
    """``/ui/``: the runs."""
    return RedirectResponse(link(request, "runs"), status_code=303)


async def listing(request: Request, state: Served, viewer: Viewer) -> Response:
    """``/ui/runs?status=&workflow=&since=&until=&id=&after=``: a page of runs,
    newest first (see :mod:`querator.dashboard.run_filters`)."""
    filters = Filters.of(request.query_params)
    after = request.query_params.get("after") or None
    found = await page_of_runs(state.aq, filters, after, PAGE + 1)
    more = found[PAGE - 1].run_id if len(found) > PAGE and filters.run_id is None else None
    return page(
        request,
        "runs.html",
        viewer,
        runs=found[:PAGE],
        filters=filters,
        after=after,
        more=more,
        counts=await counts(state.aq, filters.workflow, filters.where),
        statuses=get_args(RunStatus),
        done=_done(request),
    )


async def sparks(request: Request, state: Served, viewer: Viewer) -> Response:
    """``/ui/sparklines?workflow=``: the runs page's sparklines, a fragment the
    page loads after it shows (their scans never delay the list)."""
    workflow = request.query_params.get("workflow") or None
    found = await sparklines(state.aq, workflow)
    return page(request, "sparklines.html", viewer, sparks=found)


def _done(request: Request) -> str:
    """What the last bulk action did, from the URL it redirected to."""
    action = request.query_params.get("done")
    if action not in ("cancel", "resume", "retry"):
        return ""
    try:
        ok, failed = (
            int(request.query_params.get("ok", 0)),
            int(request.query_params.get("failed", 0)),
        )
    except ValueError:
        return ""
    verb = {"cancel": "Cancellation asked for", "resume": "Resumed"}.get(
        action, "Compensation retried"
    )
    text = f"{verb}: {ok} run{'s' if ok != 1 else ''}."
    if failed:
        text += f" {failed} could not be (their status had changed, or a saga to fork)."
    return text


async def detail(request: Request, state: Served, viewer: Viewer) -> Response:
    """``/ui/runs/{run_id}``: a run with its timeline, steps, child runs, what it
    waits for, its saga, what it published (events, streams) and was sent."""
    run = await get_run_async(state.aq, request.path_params["run_id"])
    children = await child_runs(state, run)
    trace = await trace_link(state.aq, run.run_id)
    attempts = await run_attempts_async(state.aq, run)
    return page(
        request,
        "run.html",
        viewer,
        run=run,
        spans=step_spans(run),
        children=children,
        lanes=lanes(run, children, state.aq.clock.now(), attempts),
        scale=SCALE,
        trace=trace,
        live=live_url(request, run),
        published=await published(state.aq, run),
        shown=SHOWN,
    )


def live_url(request: Request, run: RunInfo) -> str:
    """The event stream a run's page listens to: the ends of runs (the results
    queue), and while the run has not ended the workers' progress wakeups (a
    step ended, a value was published: :mod:`querator.workflows.engine.beacon`)."""
    queues = [RESULTS_QUEUE] if run.finished_at is not None else [RESULTS_QUEUE, PROGRESS_WAKE]
    return link(request, "events") + "?" + urlencode([("queue", name) for name in queues])


async def child_runs(state: Served, run: RunInfo) -> dict[int, RunInfo]:
    """The child runs of ``run`` by the position that started them: the children
    a body may have started (their ids derive from the parent's id and the
    call's position), looked up for every position of an ended or pending
    step call and :data:`CHILD_WINDOW` past the last (runs started before the
    parent kept links to its children), and the children its links name."""
    known = [s.position for s in run.steps] + [p.position for p in run.pending]
    top = min(CHILD_POSITIONS, max(known, default=-1) + 1 + CHILD_WINDOW)
    ids = {child_run_id(run.run_id, position): position for position in range(top)}
    ids.update({child.run_id: child.position for child in run.children})
    found = await run_infos_async(state.aq, list(ids))
    return {ids[run_id]: info for run_id, info in found.items()}


def step_spans(run: RunInfo) -> dict[int, float]:
    """Seconds from the previous step's end (the run's start for the first) to each
    ended step's end, by position: how long the step took, its retries and
    waits included (steps started together overlap: a gather shows its slowest)."""
    spans, previous = {}, run.started_at
    for step in sorted(run.steps, key=lambda s: s.finished_at):
        spans[step.position] = max(0.0, (step.finished_at - previous).total_seconds())
        previous = max(previous, step.finished_at)
    return spans


def _back(request: Request) -> Response:
    run_id = request.path_params["run_id"]
    return RedirectResponse(link(request, "run", run_id=run_id), status_code=303)


async def cancel(request: Request, state: Served, viewer: Viewer) -> Response:
    """Ask the run to end as cancelled (as ``RunHandle.cancel``)."""
    run_id = request.path_params["run_id"]
    await get_run_async(state.aq, run_id)  # RunNotFound before anything is written
    await AsyncRunHandle(state.aq, run_id).cancel("cancelled from the dashboard")
    return _back(request)


async def retry_compensation(request: Request, state: Served, viewer: Viewer) -> Response:
    """Run the failed compensation of a ``compensation_failed`` saga again."""
    await AsyncRunHandle(state.aq, request.path_params["run_id"]).retry_compensation()
    return _back(request)


async def fork(request: Request, state: Served, viewer: Viewer) -> Response:
    """Start a new run of the run's workflow and arguments that keeps the results
    of its steps before ``from_step`` (as ``querator.workflows.fork``); its page."""
    text = request.state.form.get("from_step")
    try:
        from_step = int(text) if isinstance(text, str) else -1
    except ValueError:
        raise InvalidArgument("from_step", f"must be a step's position, got {text!r}") from None
    handle = await fork_async(state.aq, request.path_params["run_id"], from_step)
    return RedirectResponse(link(request, "run", run_id=handle.run_id), status_code=303)


async def resume(request: Request, state: Served, viewer: Viewer) -> Response:
    """Resume a failed or cancelled run (as ``querator.workflows.resume``)."""
    await resume_async(state.aq, request.path_params["run_id"])
    return _back(request)
