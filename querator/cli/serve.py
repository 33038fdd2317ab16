"""``querator serve`` (the HTTP API under uvicorn) and ``querator tokens``.

```
querator serve [--dsn URL] [--host 127.0.0.1] [--port 2319] [--app myapp.flows] [--no-auth]
querator tokens create NAME [--scope read|write|admin]   # prints the token once
querator tokens list
querator tokens revoke TOKEN_ID
```
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from querator.cli import _reporting, _store, _table, _when, app, load_functions
from querator.errors import InvalidArgument
from querator.queue.backends import DEFAULT_URL

if TYPE_CHECKING:
    from querator.http.auth import AuthMode

tokens_app = typer.Typer(no_args_is_help=True, help="Bearer tokens of the HTTP API.")
app.add_typer(tokens_app, name="tokens")

Dsn = Annotated[
    str,
    typer.Option("--dsn", "--url", envvar="QUERATOR_URL", help="Store URL (postgresql://, …)."),
]


def is_loopback(host: str) -> bool:
    """True when ``host`` is a loopback address or ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@app.command()
def serve(
    dsn: Dsn = DEFAULT_URL,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind (0: any free port).")] = 2319,
    target: Annotated[
        str | None,
        typer.Option("--app", metavar="MODULE[:ATTR]", help="Workflows to start by name."),
    ] = None,
    shutdown_grace: Annotated[
        float, typer.Option(help="Seconds open requests may finish after SIGTERM.")
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
) -> None:
    """Serve the HTTP API until SIGTERM or SIGINT; prints the URL it listens on."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    from querator.http.app import create_app
    from querator.http.auth import list_tokens

    logging.basicConfig(level=log_level.upper(), stream=sys.stderr)
    with _reporting():
        functions = {f.name: f for f in load_functions(target)} if target else {}
        auth = auth_mode(host, no_auth)
        if auth == "on":
            with _store(dsn) as q:
                if not q.call(list_tokens, q.aio):
                    raise InvalidArgument(
                        "host",
                        f"{host} is not a loopback address and no token exists: "
                        "create one first (querator tokens create NAME)",
                    )
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # IPPROTO_TCP named, or asyncio leaves Nagle on (40 ms per keep-alive reply)
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
        bound = sock.getsockname()[1]
        options: dict[str, Any] = {
            "log_level": log_level.lower(),
            "access_log": False,
            "timeout_graceful_shutdown": int(shutdown_grace) or None,
            "lifespan": "on",
        }
        shown = f"[{host}]" if ":" in host else host
        if workers > 1:
            # each worker imports the app itself: it reads the store and --app here
            os.environ[DSN_VARIABLE], os.environ[APP_VARIABLE] = dsn, target or ""
            os.environ[AUTH_VARIABLE] = auth
            config = uvicorn.Config(
                "querator.cli.serve:worker_app", factory=True, workers=workers, **options
            )
        else:
            config = uvicorn.Config(create_app(dsn, functions=functions, auth=auth), **options)
        typer.echo(f"querator: serving {dsn.split('?')[0]} on http://{shown}:{bound}")
        sys.stdout.flush()
        if workers > 1:
            Multiprocess(config, sockets=[sock]).run()
        else:
            uvicorn.Server(config).run(sockets=[sock])


DSN_VARIABLE, APP_VARIABLE = "QUERATOR_SERVE_DSN", "QUERATOR_SERVE_APP"
AUTH_VARIABLE = "QUERATOR_SERVE_AUTH"
"""How ``querator serve --workers N`` hands the store, ``--app`` and the
authentication mode to its workers."""


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
    return create_app(os.environ[DSN_VARIABLE], functions=functions, auth=mode)


@tokens_app.command("create")
def tokens_create(
    name: Annotated[str, typer.Argument(help="What the token is for.")],
    scope: Annotated[str, typer.Option(help="metrics, read, write or admin.")] = "write",
    url: Dsn = DEFAULT_URL,
) -> None:
    """Create a token and print it (it is shown only this once)."""
    from querator.http.auth import create_token

    with _reporting(), _store(url) as q:
        token, _ = q.call(create_token, q.aio, name, scope)
        typer.echo(token)


@tokens_app.command("list")
def tokens_list(url: Dsn = DEFAULT_URL) -> None:
    """The tokens: id, scope, name, creation time (never the secret)."""
    from querator.http.auth import list_tokens

    with _reporting(), _store(url) as q:
        rows = [["ID", "SCOPE", "NAME", "CREATED"]]
        rows += [[t.id, t.scope, t.name, _when(t.created_at)] for t in q.call(list_tokens, q.aio)]
        _table(rows)


@tokens_app.command("revoke")
def tokens_revoke(
    token_id: Annotated[str, typer.Argument(help="The token's id (second part of qrt_ID_…).")],
    url: Dsn = DEFAULT_URL,
) -> None:
    """Delete a token; servers refuse it within seconds."""
    from querator.http.auth import revoke_token

    with _reporting(), _store(url) as q:
        if not q.call(revoke_token, q.aio, token_id):
            typer.echo(f"error: no token {token_id!r}", err=True)
            raise typer.Exit(1)
        typer.echo(f"revoked {token_id}")
