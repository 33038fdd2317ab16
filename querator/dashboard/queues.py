"""The Queues pages: every queue with its gauges (depth, leased, scheduled,
oldest age, dead-letter depth) and throughput sparklines (from the server's
sampler, :mod:`querator.dashboard.throughput`: memory, not the store), and
one queue with its dead letters, which a write token may requeue or purge,
and which it may pause or resume.

Gauges come from ``AsyncQuerator.gauges`` (bounded probes and estimates,
never a count of the table); dead letters from :mod:`querator.queue.dead_letters`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from querator.dashboard.render import link, page
from querator.dashboard.session import Viewer
from querator.dashboard.throughput import Line
from querator.errors import InvalidArgument, QueueNotFound
from querator.queue.dead_letters import dead_letters_async, purge_async, requeue_async
from querator.queue.models import QueueGauges, QueueInfo

if TYPE_CHECKING:
    from querator.dashboard.served import Served
    from querator.queue.service import AsyncQueueClient

PAGE = 200
"""Queues a page lists."""
DEAD_SHOWN = 100
"""Dead letters the queue page shows."""
ITEMS_SHOWN = 50
"""Items a page of the item browser shows."""


class Row:
    """One queue as the list shows it."""

    def __init__(
        self, info: QueueInfo, gauges: QueueGauges, dead: QueueGauges | None, line: Line | None
    ) -> None:
        self.info = info
        self.gauges = gauges
        self.dead = dead
        self.line = line
        """Its throughput, from the server's sampler (None before two samples)."""


async def _row(state: Served, info: QueueInfo) -> Row:
    dead = None
    if info.settings.dead_queue:
        with contextlib.suppress(QueueNotFound):
            dead = await state.aq.gauges(info.settings.dead_queue)
    line = state.throughput.line(info.name) if state.throughput else None
    return Row(info, await state.aq.gauges(info.name), dead, line)


async def listing(request: Request, state: Served, viewer: Viewer) -> Response:
    """``/ui/queues?after=``: queues by name, a page at a time."""
    after = request.query_params.get("after") or None
    infos = await state.aq.list_queues(pivot=after, limit=PAGE + 1)
    infos = [info for info in infos if info.name != after][:PAGE]
    rows = [await _row(state, info) for info in infos]
    more = infos[-1].name if len(infos) == PAGE else None
    return page(request, "queues.html", viewer, rows=rows, more=more)


async def detail(request: Request, state: Served, viewer: Viewer) -> Response:
    """``/ui/queues/{name}``: a queue's settings, gauges and dead letters."""
    info = await state.aq.get_queue(request.path_params["name"])
    dead = []
    if info.settings.dead_queue:
        dead = await dead_letters_async(state.aq, info.name, DEAD_SHOWN)
    row = await _row(state, info)
    return page(request, "queue.html", viewer, row=row, dead=dead, dead_shown=DEAD_SHOWN)


async def items(request: Request, state: Served, viewer: Viewer) -> Response:
    """``/ui/queues/{name}/items?partition=&after=&scheduled=``: a page of one
    partition's items in id order (only those scheduled for later with
    ``scheduled=1``), each with a bounded, binary-safe payload preview."""
    info = await state.aq.get_queue(request.path_params["name"])
    params = request.query_params
    try:
        partition = int(params.get("partition") or 0)
    except ValueError:
        raise InvalidArgument("partition", "must be a number") from None
    after = params.get("after") or None
    scheduled = params.get("scheduled") == "1"
    lister = state.aq.list_scheduled if scheduled else state.aq.list_items
    found = await lister(info.name, partition=partition, pivot=after, limit=ITEMS_SHOWN + 1)
    found = [item for item in found if item.id != after][:ITEMS_SHOWN]
    more = found[-1].id if len(found) == ITEMS_SHOWN else None
    return page(
        request,
        "queue_items.html",
        viewer,
        info=info,
        items=found,
        partition=partition,
        scheduled=scheduled,
        after=after,
        more=more,
        now=state.aq.clock.now(),
    )


async def pause(request: Request, state: Served, viewer: Viewer) -> Response:
    """Pause the queue: its items are not leased until it is resumed."""
    name = request.path_params["name"]
    await state.aq.pause_queue(name)
    return RedirectResponse(link(request, "queue", name=name), status_code=303)


async def resume(request: Request, state: Served, viewer: Viewer) -> Response:
    """Resume the paused queue: its items are leased again."""
    name = request.path_params["name"]
    await state.aq.resume_queue(name)
    return RedirectResponse(link(request, "queue", name=name), status_code=303)


def _chosen(form_ids: list[str]) -> list[str] | None:
    """The ids ticked in the form; None (all of them) when the form sent ``all``."""
    return None if "all" in form_ids else form_ids


async def requeue(request: Request, state: Served, viewer: Viewer) -> Response:
    """Send the chosen dead letters (or all) back to their queue."""
    return await _on_dead_letters(request, state, requeue_async)


async def purge(request: Request, state: Served, viewer: Viewer) -> Response:
    """Delete the chosen dead letters (or all) for good."""
    return await _on_dead_letters(request, state, purge_async)


async def _on_dead_letters(
    request: Request,
    state: Served,
    action: Callable[[AsyncQueueClient, str, Sequence[str] | None], Awaitable[int]],
) -> Response:
    """Apply ``action`` to the dead letters the form chose, then show the queue."""
    name = request.path_params["name"]
    ids = [str(v) for v in request.state.form.getlist("id")]
    if ids:
        await action(state.aq, name, _chosen(ids))
    return RedirectResponse(link(request, "queue", name=name), status_code=303)
