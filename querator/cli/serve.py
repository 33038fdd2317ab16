"""``querator serve`` (the HTTP API under uvicorn) and ``querator tokens``.

```
querator serve [--url URL] [--host 127.0.0.1] [--port 2319] [--app myapp.flows]
querator tokens create NAME [--scope read|write|admin]   # prints the token once
querator tokens list [--json]
querator tokens revoke TOKEN_ID
```

``--dsn`` is a deprecated alias of ``--url`` (it prints a warning).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import sys
from typing import Annotated, Any

import typer

from querator.cli import (
    AsJson,
    Url,
    _json_list,
    _reporting,
    _store,
    _table,
    _when,
    app,
    load_functions,
)
from querator.cli.help_format import CliGroup
from querator.errors import InvalidArgument
from querator.queue.backends import DEFAULT_URL

tokens_app = typer.Typer(cls=CliGroup, no_args_is_help=True, help="Bearer tokens of the HTTP API.")
app.add_typer(tokens_app, name="tokens")

OldDsn = Annotated[
    str | None, typer.Option("--dsn", hidden=True, help="Deprecated alias of --url.")
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
    dsn: OldDsn = None,
) -> None:
    """Serve the HTTP API until SIGTERM or SIGINT; prints the URL it listens on."""
    dsn = _chosen_url(url, dsn)
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    from querator.http.app import create_app
    from querator.http.auth import list_tokens

    logging.basicConfig(level=log_level.upper(), stream=sys.stderr)
    with _reporting():
        functions = {f.name: f for f in load_functions(target)} if target else {}
        if not is_loopback(host):
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
            config = uvicorn.Config(
                "querator.cli.serve:worker_app", factory=True, workers=workers, **options
            )
        else:
            config = uvicorn.Config(create_app(dsn, functions=functions), **options)
        typer.echo(f"querator: serving {dsn.split('?')[0]} on http://{shown}:{bound}")
        sys.stdout.flush()
        if workers > 1:
            Multiprocess(config, sockets=[sock]).run()
        else:
            uvicorn.Server(config).run(sockets=[sock])


DSN_VARIABLE, APP_VARIABLE = "QUERATOR_SERVE_DSN", "QUERATOR_SERVE_APP"
"""How ``querator serve --workers N`` hands the store and ``--app`` to its workers."""


def worker_app() -> Any:
    """The app of one worker process of ``querator serve --workers N``."""
    from querator.http.app import create_app

    target = os.environ.get(APP_VARIABLE, "")
    functions = {f.name: f for f in load_functions(target)} if target else {}
    return create_app(os.environ[DSN_VARIABLE], functions=functions)


@tokens_app.command("create")
def tokens_create(
    name: Annotated[str, typer.Argument(help="What the token is for.")],
    scope: Annotated[str, typer.Option(help="read, write or admin.")] = "write",
    url: Url = DEFAULT_URL,
    dsn: OldDsn = None,
) -> None:
    """Create a token and print it (it is shown only this once)."""
    from querator.http.auth import create_token

    url = _chosen_url(url, dsn)
    with _reporting(), _store(url) as q:
        token, _ = q.call(create_token, q.aio, name, scope)
        typer.echo(token)


@tokens_app.command("list")
def tokens_list(url: Url = DEFAULT_URL, as_json: AsJson = False, dsn: OldDsn = None) -> None:
    """The tokens: id, scope, name, creation time (never the secret)."""
    from querator.http.auth import list_tokens

    with _reporting(), _store(_chosen_url(url, dsn)) as q:
        tokens = q.call(list_tokens, q.aio)
        if as_json:
            _json_list(tokens, exclude={"secret_sha256"})
            return
        rows = [["ID", "SCOPE", "NAME", "CREATED"]]
        rows += [[t.id, t.scope, t.name, _when(t.created_at)] for t in tokens]
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
