"""The ASGI application of ``querator serve``: DUH-RPC endpoints over one
library client per namespace served (:mod:`querator.http.namespaces`), plus
``GET /health``, ``/metrics``, ``/openapi.json`` and ``/docs`` (of the
server's own namespace), and ``GET /v1/runs.stream`` (a run's stream as
server-sent events: :mod:`querator.http.stream_events`).

Long polls are coroutines waiting on the library's wakeups: an idle
``queue.lease`` holds no thread and issues no statement while it waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from types import FrameType
from typing import Any, TypeVar

import anyio
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route

from querator.dashboard import dashboard
from querator.dashboard.throughput import Sampler, interval_from_env
from querator.errors import QueratorError, Unavailable
from querator.http import internal, status
from querator.http.auth import AuthMode, TokenCheck
from querator.http.endpoints import ENDPOINTS, QUEUE_ENDPOINTS, READ
from querator.http.metrics import metrics_response
from querator.http.namespaces import NAMESPACE_HEADER, Namespaces
from querator.http.openapi import DOCS_PAGE, openapi_document
from querator.http.rpc import Answer, BadRequest, Endpoint, call, error_response, read_body
from querator.http.stream_events import STREAM_PATH, stream_events
from querator.http.wire.queue import Reply
from querator.queue.backends.namespaces import split_namespace
from querator.queue.service import AsyncQueueClient
from querator.telemetry import prometheus
from querator.telemetry.requests import joined
from querator.webhooks import AsyncWebhooks, WebhookSettings

T = TypeVar("T")
ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


@dataclass
class Shutdown:
    """Whether the server is stopping, and the long polls to answer when it does."""

    stopping: bool = False
    """True once the server has begun to shut down."""
    waits: set[anyio.CancelScope] = field(default_factory=set)
    """The open long polls, cancelled when the shutdown begins."""

    def stop(self) -> None:
        """Begin the shutdown: open long polls answer at once (on the loop)."""
        self.stopping = True
        for scope in self.waits:
            scope.cancel()

    async def unless_stopping(self, call: Callable[[], Awaitable[T]]) -> T:
        """See :meth:`ServerState.unless_stopping`."""
        if not self.stopping:
            with anyio.CancelScope() as scope:
                self.waits.add(scope)
                try:
                    return await call()
                finally:
                    self.waits.discard(scope)
        raise Unavailable("service is shutting down")


@dataclass
class ServerState:
    """What handlers reach: the library client of one namespace, the token
    check (the server's) and the workflow functions the server was given
    (``--app``)."""

    aq: AsyncQueueClient
    tokens: TokenCheck
    webhooks: AsyncWebhooks
    """Webhook endpoints and messages of the store, with the server's settings."""
    functions: dict[str, Any] = field(default_factory=dict)
    """Workflow functions by persisted name."""
    shutdown: Shutdown = field(default_factory=Shutdown)
    """The server's shutdown, shared by the states of every namespace it serves."""
    throughput: Sampler | None = None
    """The sampler of the queues' throughput (the dashboard's; the server's own
    namespace only)."""

    @property
    def stopping(self) -> bool:
        """True once the server has begun to shut down (the dashboard's live
        pages read it: :class:`querator.dashboard.served.Served`)."""
        return self.shutdown.stopping

    @property
    def waits(self) -> set[anyio.CancelScope]:
        """The open waits to cancel when the server stops."""
        return self.shutdown.waits

    def stop(self) -> None:
        """Begin the shutdown: open long polls answer at once (on the loop)."""
        self.shutdown.stop()

    async def unless_stopping(self, call: Callable[[], Awaitable[T]]) -> T:
        """``await call()``, unless the server begins to stop first: then
        Unavailable ("service is shutting down"), so the client polls again,
        elsewhere or later, instead of holding a connection being closed."""
        return await self.shutdown.unless_stopping(call)


class _Api:
    """The dispatch of every request (one catch-all route)."""

    def __init__(self, endpoints: Sequence[Endpoint]) -> None:
        self.endpoints = list(endpoints)
        self.table = {e.path: e for e in endpoints}
        self.generic = {e.path for e in QUEUE_ENDPOINTS}
        self.state: ServerState | None = None
        """The state of the server's own namespace."""
        self.namespaces: Namespaces[ServerState] | None = None
        """The states of every namespace the server serves (its own included)."""
        self.pages = {
            "/health": (self.health, None),
            "/metrics": (self.metrics, "metrics"),
            "/openapi.json": (self.openapi, READ),
            "/docs": (self.docs, READ),
        }
        """Path -> (page, the token scope it needs; None: none)."""

    @functools.cached_property
    def document(self) -> dict[str, Any]:
        """The OpenAPI document, built at its first request (building it takes
        longer than the rest of a server's start-up)."""
        return openapi_document(self.endpoints)

    async def health(self, state: ServerState) -> Response:
        try:
            await state.aq.list_queues(limit=1)
        except QueratorError as exc:
            return JSONResponse({"status": "fail", "output": str(exc)}, status_code=503)
        return JSONResponse({"status": "pass"})

    async def metrics(self, state: ServerState) -> Response:
        return await metrics_response(state.aq)

    async def openapi(self, state: ServerState) -> Response:
        return JSONResponse(self.document)

    async def docs(self, state: ServerState) -> Response:
        return HTMLResponse(DOCS_PAGE)

    async def page(self, request: Request, state: ServerState) -> Response:
        """A ``GET`` page, once the token allows it."""
        page, scope = self.pages[request.url.path]
        if scope is not None:
            try:
                await state.tokens.check(request.headers.get("authorization"), scope)
            except QueratorError as exc:
                return error_response(status.error_reply(exc))
        return await page(state)

    async def dispatch(self, request: Request) -> Response:
        path, state = request.url.path, self.state
        assert state is not None, "the app's lifespan has not started"
        if path in self.pages and request.method in ("GET", "HEAD"):
            return await self.page(request, state)
        if path == STREAM_PATH and request.method == "GET":
            return await self._stream(request, state)
        endpoint = self.table.get(path)
        try:
            answer = Answer.to(request, endpoint)
        except BadRequest as exc:
            return error_response(exc.body)
        if request.method != "POST" or endpoint is None:
            return answer.error(_refusal(request.method, path))
        return await self.rpc(request, state, endpoint, answer)

    async def _stream(self, request: Request, state: ServerState) -> Response:
        """``GET /v1/runs.stream`` (server-sent events) in the namespace asked for."""
        assert self.namespaces is not None, "the app's lifespan has not started"
        try:
            await state.tokens.check(request.headers.get("authorization"), READ)
            state = await self.namespaces.state_of(request.headers.get(NAMESPACE_HEADER))
        except QueratorError as exc:
            return error_response(status.error_reply(exc))
        return await stream_events(request, state)

    async def rpc(
        self, request: Request, state: ServerState, endpoint: Endpoint, answer: Answer
    ) -> Response:
        """One RPC: the token (the server's), the namespace, the body, the
        internal-queue guard, the handler."""
        assert self.namespaces is not None, "the app's lifespan has not started"
        try:
            header = request.headers.get("authorization")
            wanted = request.headers.get(NAMESPACE_HEADER)
            await state.tokens.check(header, endpoint.scope, wanted)
            state = await self.namespaces.state_of(wanted)
            body = await read_body(request, endpoint)
            if endpoint.path in self.generic:
                internal.guard(body, writes=endpoint.scope != READ)
            else:
                internal.guard_tokens(internal.queues_named(body))
        except BadRequest as exc:
            return answer.error(exc.body)
        except ClientDisconnect:  # gone (or cut off by the read timeout): nobody to answer
            return Response(status_code=status.BAD_REQUEST)
        except QueratorError as exc:
            return answer.error(status.error_reply(exc))
        with joined(request.headers):
            return await call(endpoint, state, body, answer)


def _refusal(method: str, path: str) -> Reply:
    """The reply to a request that is no call: not a POST, or no such method."""
    if method != "POST":
        return status.reply(status.BAD_REQUEST, f"http method '{method}' not allowed; only POST")
    return status.reply(status.NOT_IMPLEMENTED, f"no such method; {path}")


def _stop_on_signals(state: ServerState, loop: asyncio.AbstractEventLoop) -> None:
    """Chain SIGTERM and SIGINT (whose handlers the server installed) so that a
    shutdown first answers the open long polls; the server's own graceful
    shutdown then finds no request waiting. Only the main thread gets signals."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(sig)
        if not callable(previous):
            continue

        def chained(number: int, frame: FrameType | None, before: Any = previous) -> None:
            loop.call_soon_threadsafe(state.stop)
            before(number, frame)

        signal.signal(sig, chained)


def create_app(
    url: str,
    *,
    endpoints: Sequence[Endpoint] = (),
    functions: dict[str, Any] | None = None,
    client_options: dict[str, Any] | None = None,
    auth: AuthMode = "auto",
    webhook_settings: WebhookSettings | None = None,
    namespaces: Collection[str] | None = (),
) -> Starlette:
    """The application serving the store at ``url``; the client opens with the
    app's lifespan and closes with it. ``auth`` says when tokens are required
    (:data:`querator.http.auth.AuthMode`); ``webhook_settings`` are those of
    the webhook endpoints (``allow_private``, ``max_payload_bytes``, …);
    ``namespaces`` those served besides the URL's, by the ``Querator-Namespace``
    header (None: every one the store holds; :mod:`querator.http.namespaces`)."""
    api = _Api([*ENDPOINTS, *endpoints])

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        prometheus.install()  # before the first instrument records: /metrics shows all
        async with (
            AsyncQueueClient(url, **(client_options or {})) as aq,
            contextlib.AsyncExitStack() as others,
        ):
            tokens = TokenCheck(aq, auth, split_namespace(url)[1])
            await tokens.start()
            hooks = AsyncWebhooks(aq, webhook_settings)
            sampler = Sampler(aq, interval_from_env())
            state = api.state = ServerState(
                aq, tokens, hooks, dict(functions or {}), throughput=sampler
            )

            def derive(other: AsyncQueueClient) -> ServerState:
                """The state of another namespace: its client, the server's tokens."""
                hooks = AsyncWebhooks(other, webhook_settings)
                return replace(state, aq=other, webhooks=hooks, throughput=None)

            api.namespaces = Namespaces(url, state, derive, others, client_options, namespaces)
            _stop_on_signals(state, asyncio.get_running_loop())
            async with anyio.create_task_group() as background:
                background.start_soon(sampler.run)
                yield
                background.cancel_scope.cancel()

    routes = [
        Mount("/ui", dashboard(lambda: api.state)),
        Route("/{path:path}", api.dispatch, methods=ALL_METHODS),
    ]
    return Starlette(routes=routes, lifespan=lifespan)
