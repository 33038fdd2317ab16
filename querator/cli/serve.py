"""``querator serve`` (the HTTP API under uvicorn) and ``querator tokens``.

```
querator serve [--url URL] [--host 127.0.0.1] [--port 2319] [--app myapp.flows] [--no-auth]
               [--webhooks-allow-private] [--serve-namespaces NAME,NAME|'*']
querator tokens create NAME [--scope read|write|admin]   # prints the token once
querator tokens list [--json]
querator tokens revoke TOKEN_ID
```

``--dsn`` is a deprecated alias of ``--url`` (it prints a warning).
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import os
import signal
import socket
import sys
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer

from querator.cli.app import AsJson, Url, _namespaced, _reporting, _store, app
from querator.cli.help_format import CliGroup
from querator.cli.loading import load_functions
from querator.cli.output import _json_list, _table, _when
from querator.errors import InvalidArgument
from querator.http.limits import ConnectionLimits
from querator.queue.options import DEFAULT_URL

if TYPE_CHECKING:
    from querator.http.auth import AuthMode
    from querator.http.connections import ServeConfig

tokens_app = typer.Typer(cls=CliGroup, no_args_is_help=True, help="Bearer tokens of the HTTP API.")
app.add_typer(tokens_app, name="tokens")


def _namespaced_dsn(ctx: typer.Context, dsn: str | None) -> str | None:
    """The deprecated ``--dsn`` with the command's ``--namespace`` in it, as ``--url``."""
    return None if dsn is None else _namespaced(ctx, dsn)


OldDsn = Annotated[
    str | None,
    typer.Option("--dsn", hidden=True, help="Deprecated alias of --url.", callback=_namespaced_dsn),
]


def _chosen_url(url: str, dsn: str | None) -> str:
    """``--url``, or the deprecated ``--dsn`` when given (with a warning)."""
    if dsn is None:
        return url
    typer.echo("warning: --dsn is deprecated, use --url", err=True)
    return dsn


def is_loopback(host: str) -> bool:
    """True when ``host`` is a loopback address or ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Stopped(Exception):
    """SIGINT or SIGTERM outside uvicorn's own handling: stop, exit 0."""


def _stop(signum: int, frame: FrameType | None) -> None:
    raise _Stopped


@app.command()
def serve(
    url: Url = DEFAULT_URL,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind (0: any free port).")] = 2319,
    target: Annotated[
        str | None,
        typer.Option("--app", metavar="MODULE[:ATTR]", help="Workflows to start by name."),
    ] = None,
    shutdown_grace: Annotated[
        float,
        typer.Option(metavar="SECONDS", help="Seconds open requests may finish after SIGTERM."),
    ] = 5.0,
    workers: Annotated[
        int, typer.Option(min=1, max=64, help="Server processes sharing the port.")
    ] = 1,
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "INFO",
    no_auth: Annotated[
        bool,
        typer.Option(
            "--no-auth", help="Serve without tokens, even if some exist (loopback addresses only)."
        ),
    ] = False,
    header_timeout: Annotated[
        float, typer.Option(min=0.1, help="Seconds a client has to send a request's headers.")
    ] = ConnectionLimits.header_timeout,
    body_timeout: Annotated[
        float, typer.Option(min=0.1, help="Seconds a client has to send a request's body.")
    ] = ConnectionLimits.body_timeout,
    max_client_connections: Annotated[
        int, typer.Option(min=0, help="Open connections per client address (0: no cap).")
    ] = ConnectionLimits.max_per_client,
    webhooks_allow_private: Annotated[
        bool,
        typer.Option(
            "--webhooks-allow-private",
            help="Accept webhook endpoints on loopback/private addresses (development only).",
        ),
    ] = False,
    serve_namespaces: Annotated[
        str,
        typer.Option(
            "--serve-namespaces",
            metavar="NAME,NAME",
            help="Namespaces served besides --url's, by the Querator-Namespace header"
            " ('*': every one of the store); this server's tokens are valid in all.",
        ),
    ] = "",
    dsn: OldDsn = None,
) -> None:
    """Serve the HTTP API until SIGTERM or SIGINT; prints the URL it listens on."""
    dsn = _chosen_url(url, dsn)
    logging.basicConfig(level=log_level.upper(), stream=sys.stderr)
    limits = ConnectionLimits(header_timeout, body_timeout, max_client_connections)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _stop)  # also what uvicorn restores, and re-raises, when it ends
    started = False
    try:
        with _reporting():
            functions = {f.name: f for f in load_functions(target)} if target else {}
            auth = auth_mode(host, no_auth)
            os.environ[NAMESPACES_VARIABLE] = serve_namespaces
            _served()  # a bad name: refused here, before listening
            _check_store(dsn, host, auth)
            sock = _listen(host, port)
            if webhooks_allow_private:
                os.environ[PRIVATE_VARIABLE] = "1"
            config = _config(dsn, target, functions, auth, limits, workers, log_level)
            config.timeout_graceful_shutdown = int(shutdown_grace) or None
            shown = f"[{host}]" if ":" in host else host
            typer.echo(
                f"querator: serving {dsn.split('?')[0]} on http://{shown}:{sock.getsockname()[1]}"
            )
            sys.stdout.flush()
            started = _run(config, sock, workers)
    except (_Stopped, KeyboardInterrupt):
        raise typer.Exit(0) from None
    if not started:  # uvicorn logged why (the store failed to open, …)
        raise typer.Exit(1)


def _check_store(dsn: str, host: str, auth: AuthMode) -> None:
    """Open the store once before listening (a bad URL is one line, not a
    traceback); a public bind needs a token."""
    from querator.http.auth import list_tokens
    from querator.queue.client import QueueClient

    with QueueClient(dsn) as q:
        tokens = q.call(list_tokens, q.aio)
    if auth == "on" and not tokens:
        raise InvalidArgument(
            "host",
            f"{host} is not a loopback address and no token exists: "
            "create one first (querator tokens create NAME)",
        )


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket; InvalidArgument naming what cannot be bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, or asyncio leaves Nagle on (40 ms per keep-alive reply)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        why = exc.strerror or str(exc)
        if exc.errno == errno.EADDRINUSE:
            raise InvalidArgument("port", f"{port} is in use on {host}") from None
        raise InvalidArgument("host", f"cannot listen on {host}:{port}: {why}") from None
    return sock


def _config(
    dsn: str,
    target: str | None,
    functions: dict[str, Any],
    auth: AuthMode,
    limits: ConnectionLimits,
    workers: int,
    log_level: str,
) -> ServeConfig:
    from querator.http.app import create_app
    from querator.http.connections import ServeConfig

    options: dict[str, Any] = {
        "log_level": log_level.lower(),
        "access_log": False,
        "lifespan": "on",
    }
    if workers == 1:
        app = create_app(
            dsn,
            functions=functions,
            auth=auth,
            webhook_settings=_hook_settings(),
            namespaces=_served(),
        )
        return ServeConfig(app, limits, **options)
    # each worker imports the app itself: it reads the store and --app here
    os.environ[DSN_VARIABLE], os.environ[APP_VARIABLE] = dsn, target or ""
    os.environ[AUTH_VARIABLE] = auth
    app_path = "querator.cli.serve:worker_app"
    return ServeConfig(app_path, limits, factory=True, workers=workers, **options)


def _run(config: ServeConfig, sock: socket.socket, workers: int) -> bool:
    """Serve until a signal; False when the server did not start."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    if workers > 1:
        Multiprocess(config, sockets=[sock]).run()
        return True
    server = uvicorn.Server(config)
    with contextlib.suppress(_Stopped):  # uvicorn re-raises the signal that stopped it
        server.run(sockets=[sock])
    return server.started


DSN_VARIABLE, APP_VARIABLE = "QUERATOR_SERVE_DSN", "QUERATOR_SERVE_APP"
AUTH_VARIABLE = "QUERATOR_SERVE_AUTH"
PRIVATE_VARIABLE = "QUERATOR_SERVE_WEBHOOKS_PRIVATE"
NAMESPACES_VARIABLE = "QUERATOR_SERVE_NAMESPACES"
"""How ``querator serve --workers N`` hands the store, ``--app``, the
authentication mode, ``--webhooks-allow-private`` and ``--serve-namespaces``
to its workers."""


def _served() -> frozenset[str] | None:
    """The namespaces served besides the URL's (``--serve-namespaces``)."""
    from querator.http.namespaces import served_namespaces

    return served_namespaces(os.environ.get(NAMESPACES_VARIABLE, ""))


def _hook_settings() -> Any:
    """The webhook settings of the served API (``--webhooks-allow-private``)."""
    from querator.webhooks import WebhookSettings

    return WebhookSettings(allow_private=os.environ.get(PRIVATE_VARIABLE) == "1")


def auth_mode(host: str, no_auth: bool) -> AuthMode:
    """When the server requires tokens: ``off`` with ``--no-auth`` (loopback
    only), ``on`` on a public address, else ``auto`` (as soon as the store has
    tokens)."""
    if no_auth and not is_loopback(host):
        raise InvalidArgument(
            "host", f"{host} is not a loopback address: --no-auth serves loopback addresses only"
        )
    if no_auth:
        return "off"
    return "auto" if is_loopback(host) else "on"


def worker_app() -> Any:
    """The app of one worker process of ``querator serve --workers N``."""
    from querator.http.app import create_app

    target = os.environ.get(APP_VARIABLE, "")
    functions = {f.name: f for f in load_functions(target)} if target else {}
    auth = os.environ.get(AUTH_VARIABLE, "on")
    mode: AuthMode = "off" if auth == "off" else "auto" if auth == "auto" else "on"
    return create_app(
        os.environ[DSN_VARIABLE],
        functions=functions,
        auth=mode,
        webhook_settings=_hook_settings(),
        namespaces=_served(),
    )


@tokens_app.command("create")
def tokens_create(
    name: Annotated[str, typer.Argument(help="What the token is for.")],
    scope: Annotated[str, typer.Option(help="metrics, read, write or admin.")] = "write",
    for_namespaces: Annotated[
        str | None,
        typer.Option(
            "--for-namespaces",
            help="Comma-separated namespaces the token is valid for (default: every one "
            "the server serves).",
        ),
    ] = None,
    url: Url = DEFAULT_URL,
    dsn: OldDsn = None,
) -> None:
    """Create a token and print it (it is shown only this once)."""
    from querator.http.auth import create_token

    url = _chosen_url(url, dsn)
    allowed = None if for_namespaces is None else [n.strip() for n in for_namespaces.split(",")]
    with _reporting(), _store(url) as q:
        token, _ = q.call(create_token, q.aio, name, scope, allowed)
        typer.echo(token)


@tokens_app.command("list")
def tokens_list(url: Url = DEFAULT_URL, as_json: AsJson = False, dsn: OldDsn = None) -> None:
    """The tokens: id, scope, name, creation time, namespaces (never the secret)."""
    from querator.http.auth import list_tokens

    with _reporting(), _store(_chosen_url(url, dsn)) as q:
        tokens = q.call(list_tokens, q.aio)
        if as_json:
            _json_list(tokens, exclude={"secret_sha256"})
            return
        rows = [["ID", "SCOPE", "NAME", "CREATED", "NAMESPACES"]]
        rows += [
            [t.id, t.scope, t.name, _when(t.created_at), ",".join(t.namespaces or ["*"])]
            for t in tokens
        ]
        _table(rows)


@tokens_app.command("revoke")
def tokens_revoke(
    token_id: Annotated[str, typer.Argument(help="The token's id (second part of qrt_ID_…).")],
    url: Url = DEFAULT_URL,
    dsn: OldDsn = None,
) -> None:
    """Delete a token; servers refuse it within seconds."""
    from querator.http.auth import revoke_token

    url = _chosen_url(url, dsn)
    with _reporting(), _store(url) as q:
        if not q.call(revoke_token, q.aio, token_id):
            typer.echo(f"error: no token {token_id!r}", err=True)
            raise typer.Exit(1)
        typer.echo(f"revoked {token_id}")
