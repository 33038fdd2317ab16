"""The Tasks pages: the deferred calls of ``@task`` functions on a task queue
(waiting, scheduled, running, or failed: dead-lettered), by state and name;
one task with its attempts, arguments, error and kept outcome; a write token
retries failed tasks and cancels tasks no worker has started.

Tasks are read through :mod:`querator.tasks.listing` (bounded pages of the
queue and its dead letters) and changed through the library's own calls.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from querator.dashboard.render import link, page
from querator.dashboard.session import Viewer
from querator.errors import InvalidArgument, QueueNotFound
from querator.tasks.handles import cancel_unstarted, retry_failed_async, stored_outcome
from querator.tasks.layout import TASK_QUEUE
from querator.tasks.listing import find_task_async, list_tasks_async

if TYPE_CHECKING:
    from querator.dashboard.served import Served

SHOWN = 200
"""Tasks a list shows (the oldest first)."""
STATES = ("waiting", "scheduled", "running", "failed")


def _queue(request: Request) -> str:
    return request.query_params.get("queue") or TASK_QUEUE


async def listing(request: Request, state: Served, viewer: Viewer) -> Response:
    """``/ui/tasks?queue=&state=&name=``: a task queue's tasks, oldest first,
    filtered by state (``failed``: its dead letters) and task name, with counts
    by name; live (the queue and its dead queue watched)."""
    queue, params = _queue(request), request.query_params
    chosen = params.get("state") or ""
    if chosen and chosen not in STATES:
        raise InvalidArgument("state", f"one of {', '.join(STATES)}, not {chosen!r}")
    name = params.get("name") or None
    failed = chosen == "failed"
    found = await list_tasks_async(state.aq, queue, failed=failed, name=name, limit=SHOWN)
    if chosen and not failed:
        found = [info for info in found if info.state == chosen]
    counts = sorted(Counter(info.name for info in found).items())
    watched = [queue]
    with contextlib.suppress(QueueNotFound):
        dead = (await state.aq.get_queue(queue)).settings.dead_queue
        watched += [dead] if dead else []
    return page(
        request,
        "tasks.html",
        viewer,
        queue=queue,
        tasks=found,
        counts=counts,
        chosen=chosen,
        name=name or "",
        states=STATES,
        shown=SHOWN,
        watched=watched,
    )


async def detail(request: Request, state: Served, viewer: Viewer) -> Response:
    """``/ui/tasks/{item_id}?queue=``: one task call: its state, attempts,
    arguments, why it failed (error and traceback) and its kept outcome."""
    queue = _queue(request)
    found = await find_task_async(state.aq, queue, request.path_params["item_id"])
    if found is None:
        raise LookupError(f"no task {request.path_params['item_id']} on queue {queue!r}")
    info, item = found
    outcome = await stored_outcome(state.aq, info.task_id)
    return page(request, "task.html", viewer, queue=queue, task=info, item=item, outcome=outcome)


def _ids(request: Request) -> list[str]:
    ids = [str(v) for v in request.state.form.getlist("id")]
    if not ids:
        raise InvalidArgument("id", "choose the tasks to act on")
    return ids


def _back(request: Request, queue: str) -> Response:
    """To the page the action came from (a task's or the list), when it is the dashboard's."""
    went = str(request.state.form.get("back") or "")
    home = link(request, "tasks")
    if not went.startswith(home):
        went = f"{home}?{urlencode({'queue': queue})}"
    return RedirectResponse(went, status_code=303)


async def retry(request: Request, state: Served, viewer: Viewer) -> Response:
    """Send the chosen failed tasks back to their queue, with fresh attempts."""
    queue = _queue(request)
    await retry_failed_async(state.aq, queue, _ids(request))
    return _back(request, queue)


async def cancel(request: Request, state: Served, viewer: Viewer) -> Response:
    """Remove the chosen tasks that no worker has started (a running one stays:
    the refusal is the page's error)."""
    queue = _queue(request)
    ids = _ids(request)
    refused = [item_id for item_id in ids if not await cancel_unstarted(state.aq, queue, item_id)]
    if refused:
        raise InvalidArgument("id", f"started, done or not waiting: {', '.join(refused)}")
    return _back(request, queue)
