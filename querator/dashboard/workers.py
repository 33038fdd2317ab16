"""The Workers page: the registry of workers (who polls what, since when, what
each serves) and the work no live worker serves.

It reads :func:`~querator.workflows.pollers.read_pollers` and
:func:`~querator.workflows.pollers.unserved_items`, as ``querator health`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response

from querator.dashboard.render import page
from querator.dashboard.session import Viewer
from querator.workflows.pollers import UNSERVED_GRACE, read_pollers, unserved_items

if TYPE_CHECKING:
    from querator.dashboard.served import Served

UNSERVED_PROBE = 200
"""Items read from the head of each partition to find work nobody serves."""


async def listing(request: Request, state: Served, viewer: Viewer) -> Response:
    """``/ui/workers``: live workers first, then those gone (newest seen first)."""
    pollers = await read_pollers(state.aq)
    pollers.sort(key=lambda p: (not p.live, -p.last_seen.timestamp(), p.client_id))
    unserved = await unserved_items(state.aq, limit=UNSERVED_PROBE)
    return page(
        request, "workers.html", viewer, pollers=pollers, unserved=unserved, grace=UNSERVED_GRACE
    )
