"""``querator webhooks``: endpoints, sending, failed deliveries, re-drives, the worker.

```
querator webhooks list | show ID [--secret] | add URL [--event-type T]... | disable ID [--reason R]
querator webhooks enable ID | rotate-secret ID [--grace S] | delete ID
querator webhooks send EVENT_TYPE (JSON | @FILE | -) [--idempotency-key K] [--ordering-key K]
querator webhooks send EVENT_TYPE --payload-file FILE
querator webhooks attempts (--message ID | --endpoint ID) [--limit N]
querator webhooks failed [--endpoint ID] [--since ISO] [--limit N]
querator webhooks redrive [DELIVERY_ID] [--endpoint ID] [--since ISO]
querator webhooks worker [--concurrency N] [--allow-private] [--log-format kv|json]
```
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from querator.cli.app import AsJson, Url, _reporting, _store, app
from querator.cli.help_format import CliGroup
from querator.cli.output import _table, _when
from querator.cli.worker import WORKER_STORE_WAIT, LogFormat, LogLevel, check_logging
from querator.errors import InvalidArgument
from querator.queue.client import QueueClient
from querator.queue.options import DEFAULT_URL
from querator.telemetry.logs import configure_logging
from querator.webhooks import DeliveryWorker, Endpoint, Webhooks, WebhookSettings

webhooks_app = typer.Typer(
    cls=CliGroup, no_args_is_help=True, help="Webhook endpoints and deliveries."
)
app.add_typer(webhooks_app, name="webhooks")

AllowPrivate = Annotated[
    bool,
    typer.Option(
        "--allow-private",
        help="Allow loopback/private targets (development only; never cloud metadata).",
    ),
]
Since = Annotated[
    str | None, typer.Option(help="Only deliveries failed at or after this ISO time (UTC).")
]


def _since(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidArgument("since", f"{text!r} is not an ISO date-time") from None
    return (
        when if when.tzinfo is not None else when.replace(tzinfo=datetime.now().astimezone().tzinfo)
    )


def _shown(endpoint: Endpoint, secret: bool = False) -> str:
    exclude = set() if secret else {"secrets", "gen", "token"}
    data = endpoint.model_dump(mode="json", exclude=exclude)
    if secret:
        data["secret"] = endpoint.secret
    return json.dumps(data, indent=2)


@webhooks_app.command("list")
def endpoints_list(url: Url = DEFAULT_URL, as_json: AsJson = False) -> None:
    """Every endpoint: id, URL, event types, state."""
    with _reporting(), _store(url) as q:
        endpoints = Webhooks(q).list_endpoints()
    if as_json:
        for e in endpoints:
            typer.echo(e.model_dump_json(exclude={"secrets", "gen", "token"}))
        return
    rows = [["ID", "URL", "EVENT TYPES", "STATE", "FAILING SINCE"]]
    for e in endpoints:
        state = f"disabled: {e.disabled_reason}" if e.disabled else "enabled"
        types = ",".join(e.event_types) if e.event_types else "*"
        rows.append([e.id, e.url, types, state, _when(e.failing_since)])
    _table(rows)


@webhooks_app.command("show")
def endpoints_show(
    endpoint_id: str,
    secret: Annotated[bool, typer.Option("--secret", help="Print the signing secret.")] = False,
    url: Url = DEFAULT_URL,
) -> None:
    """One endpoint (JSON); its secret only with --secret."""
    with _reporting(), _store(url) as q:
        typer.echo(_shown(Webhooks(q).get_endpoint(endpoint_id), secret))


@webhooks_app.command("add")
def endpoints_add(
    target: Annotated[str, typer.Argument(metavar="URL")],
    event_type: Annotated[
        list[str] | None, typer.Option(help="Event type (or 'prefix.*'); repeat. Default: all.")
    ] = None,
    description: str = "",
    rate_limit: Annotated[float | None, typer.Option(help="Deliveries/s per worker.")] = None,
    max_in_flight: Annotated[int, typer.Option(help="Attempts at once per worker.")] = 10,
    header: Annotated[list[str] | None, typer.Option(help="NAME=VALUE sent along; repeat.")] = None,
    ordered: Annotated[bool, typer.Option(help="One at a time per ordering key.")] = False,
    allow_private: AllowPrivate = False,
    url: Url = DEFAULT_URL,
) -> None:
    """Add an endpoint; prints it with its secret (JSON)."""
    with _reporting():
        headers = {}
        for entry in header or []:
            name, sep, value = entry.partition("=")
            if not sep:
                raise InvalidArgument("header", f"{entry!r} is not NAME=VALUE")
            headers[name] = value
        with QueueClient(url) as q:
            endpoint = Webhooks(q, WebhookSettings(allow_private=allow_private)).add_endpoint(
                target,
                description=description,
                event_types=event_type or None,
                rate_limit=rate_limit,
                max_in_flight=max_in_flight,
                headers=headers,
                ordered=ordered,
            )
        typer.echo(_shown(endpoint, secret=True))


@webhooks_app.command("disable")
def endpoints_disable(
    endpoint_id: str,
    reason: Annotated[str, typer.Option(help="Why, shown by list.")] = "",
    url: Url = DEFAULT_URL,
) -> None:
    """Stop delivering to an endpoint."""
    with _reporting(), _store(url) as q:
        Webhooks(q).disable_endpoint(endpoint_id, reason)
    typer.echo(f"{endpoint_id}: disabled")


@webhooks_app.command("enable")
def endpoints_enable(endpoint_id: str, url: Url = DEFAULT_URL) -> None:
    """Deliver to an endpoint again."""
    with _reporting(), _store(url) as q:
        Webhooks(q).enable_endpoint(endpoint_id)
    typer.echo(f"{endpoint_id}: enabled")


@webhooks_app.command("rotate-secret")
def endpoints_rotate(
    endpoint_id: str,
    grace: Annotated[float, typer.Option(help="Seconds the old secret still signs.")] = 86_400.0,
    url: Url = DEFAULT_URL,
) -> None:
    """Give an endpoint a new secret; prints it."""
    with _reporting(), _store(url) as q:
        typer.echo(Webhooks(q).rotate_secret(endpoint_id, grace=grace).secret)


@webhooks_app.command("delete")
def endpoints_delete(endpoint_id: str, url: Url = DEFAULT_URL) -> None:
    """Delete an endpoint."""
    with _reporting(), _store(url) as q:
        Webhooks(q).delete_endpoint(endpoint_id)
    typer.echo(f"{endpoint_id}: deleted")


@webhooks_app.command("send")
def send(
    event_type: str,
    payload: Annotated[
        str | None,
        typer.Argument(metavar="[JSON]", help="The payload; @PATH reads a file, - reads stdin."),
    ] = None,
    payload_file: Annotated[
        Path | None,
        typer.Option(help="Read the payload from this file ('-': stdin)."),
    ] = None,
    idempotency_key: str | None = None,
    ordering_key: Annotated[
        str | None,
        typer.Option(help="Deliveries of one key reach an ordered endpoint one at a time."),
    ] = None,
    url: Url = DEFAULT_URL,
) -> None:
    """Send a message; prints its id and the endpoints it goes to."""
    with _reporting():
        value = _payload(payload, payload_file)
        with _store(url) as q:
            message = Webhooks(q).send(
                event_type, value, idempotency_key=idempotency_key, ordering_key=ordering_key
            )
    typer.echo(f"{message.id} -> {', '.join(message.endpoints) or 'no endpoint'}")


def _payload(argument: str | None, path: Path | None) -> Any:
    """The JSON payload from the argument, ``@PATH``, ``-`` (stdin) or --payload-file."""
    if (argument is None) == (path is None):
        raise InvalidArgument("payload", "give it as JSON, @PATH, - (stdin) or --payload-file")
    if argument is not None and argument.startswith("@"):
        path = Path(argument[1:])
    elif argument == "-":
        path = Path("-")
    text = argument or ""
    if path is not None:
        text = sys.stdin.read() if str(path) == "-" else _read(path)
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidArgument("payload", f"is not JSON: {exc}") from None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument("payload", f"cannot read {str(path)[:200]!r}: {exc}") from None


@webhooks_app.command("attempts")
def attempts(
    message: Annotated[str | None, typer.Option(help="A message id.")] = None,
    endpoint: Annotated[str | None, typer.Option(help="An endpoint id.")] = None,
    limit: int = 100,
    url: Url = DEFAULT_URL,
    as_json: AsJson = False,
) -> None:
    """The attempts log of a message, or the newest attempts to an endpoint."""
    with _reporting(), _store(url) as q:
        found = Webhooks(q).attempts(message_id=message, endpoint_id=endpoint, limit=limit)
    if as_json:
        for a in found:
            typer.echo(a.model_dump_json())
        return
    rows = [["AT", "MESSAGE", "ENDPOINT", "#", "STATUS", "MS", "OUTCOME", "ERROR"]]
    for a in found:
        status = str(a.status_code) if a.status_code is not None else "-"
        rows.append([_when(a.at), a.message_id, a.endpoint_id, str(a.seq), status])
        rows[-1] += [f"{a.latency_ms:.0f}", a.outcome.value, a.error[:60] or "-"]
    _table(rows)


@webhooks_app.command("failed")
def failed(
    endpoint: Annotated[str | None, typer.Option(help="Only this endpoint's.")] = None,
    since: Since = None,
    limit: int = 100,
    url: Url = DEFAULT_URL,
    as_json: AsJson = False,
) -> None:
    """Failed deliveries waiting to be re-driven."""
    with _reporting(), _store(url) as q:
        found = Webhooks(q).failed(endpoint_id=endpoint, since=_since(since), limit=limit)
    if as_json:
        for f in found:
            typer.echo(f.model_dump_json())
        return
    rows = [["ID", "FAILED AT", "MESSAGE", "ENDPOINT", "ATTEMPTS", "REASON"]]
    for f in found:
        rows.append([f.id, _when(f.failed_at), f.message_id, f.endpoint_id, str(f.attempts)])
        rows[-1].append(f.reason[:80])
    _table(rows)


@webhooks_app.command("redrive")
def redrive(
    delivery_id: Annotated[str | None, typer.Argument(help="A failed delivery's id.")] = None,
    endpoint: Annotated[str | None, typer.Option(help="Every failed delivery of it.")] = None,
    since: Since = None,
    url: Url = DEFAULT_URL,
) -> None:
    """Deliver failed deliveries again (from the first attempt of the schedule)."""
    with _reporting(), _store(url) as q:
        count = Webhooks(q).redrive(delivery_id, endpoint_id=endpoint, since=_since(since))
    typer.echo(f"re-driven: {count}")


@webhooks_app.command("worker")
def worker(
    url: Url = DEFAULT_URL,
    concurrency: Annotated[int, typer.Option(help="Deliveries in hand at once.")] = 200,
    timeout: Annotated[float, typer.Option(help="Seconds one attempt may take.")] = 15.0,
    allow_private: AllowPrivate = False,
    shutdown_grace: Annotated[
        float, typer.Option(help="Seconds in-flight attempts may finish after SIGTERM.")
    ] = 20.0,
    wait_for_store: Annotated[
        bool,
        typer.Option(help="Wait for an unreachable store at start-up instead of failing."),
    ] = True,
    log_level: LogLevel = "INFO",
    log_format: LogFormat = "kv",
) -> None:
    """Deliver webhooks until SIGTERM or SIGINT. Private and loopback targets are
    refused at every attempt unless this worker has --allow-private too (adding
    an endpoint with --allow-private does not allow its deliveries)."""
    with _reporting():  # bad options: one line, before anything is opened
        level, fmt = check_logging(log_level, log_format)
    configure_logging(fmt, level, sys.stderr)
    if allow_private:
        logging.getLogger("querator.webhooks").warning(
            "delivering to private and loopback targets too (--allow-private)"
        )
    with _reporting():
        settings = WebhookSettings(timeout=timeout, allow_private=allow_private)
        with QueueClient(url, wait_for_store=WORKER_STORE_WAIT if wait_for_store else 0.0) as q:
            DeliveryWorker(
                q, settings, concurrency=concurrency, shutdown_grace=shutdown_grace
            ).run()
