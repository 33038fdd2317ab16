"""The dashboard's ASGI application, mounted at ``/ui`` by ``querator serve``:
its routes, the sign-in pages and the one place that turns errors into pages.

Pages are GETs that read through the library's own functions; actions are
POSTs of forms (:mod:`querator.dashboard.session` checks their origin, CSRF
token and the token's scope) answered by a redirect to the page they came from.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from querator.dashboard import (
    locks,
    queues,
    run_bulk,
    runs,
    schedules,
    tasks,
    webhooks,
    workers,
)
from querator.dashboard.live import events
from querator.dashboard.render import ROUTER_KEY, link, page
from querator.dashboard.served import Served
from querator.dashboard.session import (
    CSRF_COOKIE,
    Viewer,
    check_origin,
    read_form,
    sign_in,
    sign_out,
    viewer,
    writer,
)
from querator.errors import (
    Forbidden,
    InvalidArgument,
    QueratorError,
    QueueNotFound,
    Unauthorized,
)
from querator.workflows.errors import RunNotFound

Handler = Callable[[Request, Served, Viewer], Awaitable[Response]]
_STATUS: dict[type[Exception], int] = {
    Unauthorized: 401,
    Forbidden: 403,
    RunNotFound: 404,
    QueueNotFound: 404,
    LookupError: 404,  # the webhooks' EndpointNotFound, MessageNotFound, DeliveryNotFound
}


def _error_page(request: Request, exc: QueratorError, who: Viewer | None) -> Response:
    status = next((code for kind, code in _STATUS.items() if isinstance(exc, kind)), 500)
    if isinstance(exc, InvalidArgument):
        status = 400
    shown = who or Viewer(can_write=False, csrf="", signed_in=False)
    return page(request, "error.html", shown, status_code=status, error=exc, status=status)


class Dashboard:
    """The routes, bound to the server's state once its lifespan has begun."""

    def __init__(self, state: Callable[[], Served | None]) -> None:
        self._state = state

    def served(self) -> Served:
        found = self._state()
        assert found is not None, "the server's lifespan has not started"
        return found

    def view(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """A GET page: the viewer is checked first (to the login page without a token)."""

        async def endpoint(request: Request) -> Response:
            state, who = self.served(), None
            try:
                who = await viewer(request, state.tokens)
                return await handler(request, state, who)
            except Unauthorized:
                return RedirectResponse(link(request, "login"), status_code=303)
            except QueratorError as exc:
                return _error_page(request, exc, who)

        return endpoint

    def action(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """A POST action: refused unless :func:`~querator.dashboard.session.writer` allows it."""

        async def endpoint(request: Request) -> Response:
            state, who = self.served(), None
            try:
                who = await writer(request, state.tokens, await read_form(request))
                response = await handler(request, state, who)
            except QueratorError as exc:
                return _error_page(request, exc, who)
            if request.headers.get("hx-request") and response.status_code == 303:
                # htmx's request would follow the redirect itself: have it load the page
                return Response(headers={"hx-redirect": response.headers["location"]})
            return response

        return endpoint

    async def login_page(self, request: Request) -> Response:
        return page(request, "login.html", signed_out(request), failed=False)

    async def login(self, request: Request) -> Response:
        state = self.served()
        try:
            form = await read_form(request)
            check_origin(request, form)
            token = str(form.get("token", "")).strip()
            await state.tokens.check(f"Bearer {token}", "read")
        except QueratorError as exc:
            return page(
                request, "login.html", signed_out(request), status_code=401, failed=str(exc)
            )
        response = RedirectResponse(link(request, "runs"), status_code=303)
        sign_in(response, request, token)
        return response

    async def logout(self, request: Request) -> Response:
        response = RedirectResponse(link(request, "login"), status_code=303)
        sign_out(response)
        return response

    def routes(self) -> list[Route | Mount]:
        """Every route of the dashboard (relative to its mount point)."""
        view, act = self.view, self.action
        return [
            Route("/", view(runs.home), name="home"),
            Route("/login", self.login_page, name="login"),
            Route("/login", self.login, methods=["POST"], name="login_post"),
            Route("/logout", self.logout, methods=["POST"], name="logout"),
            Route("/runs", view(runs.listing), name="runs"),
            Route("/sparklines", view(runs.sparks), name="sparklines"),
            Route(
                "/runs/cancel", act(run_bulk.cancel_picked), methods=["POST"], name="cancel_picked"
            ),
            Route(
                "/runs/resume", act(run_bulk.resume_picked), methods=["POST"], name="resume_picked"
            ),
            Route("/runs/all/{action}", view(run_bulk.confirm_matching), name="matching"),
            Route(
                "/runs/all/{action}",
                act(run_bulk.act_on_matching),
                methods=["POST"],
                name="matching_post",
            ),
            Route("/runs/{run_id}", view(runs.detail), name="run"),
            Route("/runs/{run_id}/cancel", act(runs.cancel), methods=["POST"], name="cancel"),
            Route("/runs/{run_id}/resume", act(runs.resume), methods=["POST"], name="resume"),
            Route("/runs/{run_id}/fork", act(runs.fork), methods=["POST"], name="fork"),
            Route(
                "/runs/{run_id}/retry-compensation",
                act(runs.retry_compensation),
                methods=["POST"],
                name="retry_compensation",
            ),
            Route("/queues", view(queues.listing), name="queues"),
            Route("/queues/{name}", view(queues.detail), name="queue"),
            Route("/queues/{name}/items", view(queues.items), name="queue_items"),
            Route("/queues/{name}/requeue", act(queues.requeue), methods=["POST"], name="requeue"),
            Route("/queues/{name}/purge", act(queues.purge), methods=["POST"], name="purge"),
            Route("/queues/{name}/pause", act(queues.pause), methods=["POST"], name="pause_queue"),
            Route(
                "/queues/{name}/resume", act(queues.resume), methods=["POST"], name="resume_queue"
            ),
            Route("/tasks", view(tasks.listing), name="tasks"),
            Route("/tasks/retry", act(tasks.retry), methods=["POST"], name="task_retry"),
            Route("/tasks/cancel", act(tasks.cancel), methods=["POST"], name="task_cancel"),
            Route("/tasks/{item_id}", view(tasks.detail), name="task"),
            Route("/schedules", view(schedules.listing), name="schedules"),
            Route(
                "/schedules/{name}/pause",
                act(schedules.pause),
                methods=["POST"],
                name="schedule_pause",
            ),
            Route(
                "/schedules/{name}/resume",
                act(schedules.resume),
                methods=["POST"],
                name="schedule_resume",
            ),
            Route(
                "/schedules/{name}/trigger",
                act(schedules.trigger),
                methods=["POST"],
                name="schedule_trigger",
            ),
            Route("/locks", view(locks.locks), name="locks"),
            Route("/webhooks", view(webhooks.listing), name="webhooks"),
            Route(
                "/webhooks/endpoints/{endpoint_id}",
                view(webhooks.endpoint),
                name="webhook_endpoint",
            ),
            Route(
                "/webhooks/endpoints/{endpoint_id}/disable",
                act(webhooks.disable),
                methods=["POST"],
                name="webhook_disable",
            ),
            Route(
                "/webhooks/endpoints/{endpoint_id}/enable",
                act(webhooks.enable),
                methods=["POST"],
                name="webhook_enable",
            ),
            Route(
                "/webhooks/messages/{message_id}", view(webhooks.message), name="webhook_message"
            ),
            Route(
                "/webhooks/redrive", act(webhooks.redrive), methods=["POST"], name="webhook_redrive"
            ),
            Route("/workers", view(workers.listing), name="workers"),
            Route("/events", view(events), name="events"),
            Mount(
                "/static", StaticFiles(packages=[("querator.dashboard", "static")]), name="static"
            ),
        ]


def signed_out(request: Request) -> Viewer:
    """A viewer not signed in, with the browser's CSRF token (a fresh one when it
    has none): the login form carries it too."""
    csrf = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32)
    return Viewer(can_write=False, csrf=csrf, signed_in=False)


def dashboard(state: Callable[[], Any]) -> ASGIApp:
    """The dashboard app over the server state ``state()`` returns (None before
    the server's lifespan began); mount it at ``/ui``."""
    app = Starlette(routes=Dashboard(state).routes())

    async def with_router(scope: Scope, receive: Receive, send: Send) -> None:
        scope[ROUTER_KEY] = app.router  # for links, wherever the app is mounted
        await app(scope, receive, send)

    return with_router
