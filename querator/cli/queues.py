"""``querator queues``, ``querator dead`` and ``querator health``."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from querator.cli.app import AsJson, Url, _reporting, _store, app, dead_app, queues_app
from querator.cli.output import _json_list, _table, _when
from querator.errors import InvalidArgument, QueratorError
from querator.queue.dead_letters import dead_letters, purge, requeue
from querator.queue.dead_reasons import ATTEMPTS_HEADER, REASON_HEADER, source_queue
from querator.queue.models import KEPT, QueueSettings, StoredItem
from querator.queue.options import DEFAULT_URL
from querator.queue.validation import check_duration
from querator.workflows.pollers import UNSERVED_GRACE, unserved_items


@queues_app.command("list")
def queues_list(url: Url = DEFAULT_URL, as_json: AsJson = False) -> None:
    """List queues with their main settings."""
    with _reporting(), _store(url) as q:
        queues, pivot = [], None
        while page := [i for i in q.list_queues(pivot=pivot, limit=100) if i.name != pivot]:
            queues.extend(page)
            pivot = page[-1].name
    if as_json:
        _json_list(queues)
        return
    rows = [["NAME", "PARTITIONS", "LEASE_TIMEOUT", "MAX_ATTEMPTS", "DEAD_QUEUE"]]
    for info in queues:
        s = info.settings
        row = [info.name, str(s.partitions), f"{s.lease_timeout:g}", str(s.max_attempts)]
        rows.append([*row, s.dead_queue or "-"])
    _table(rows)


@queues_app.command("stats")
def queues_stats(name: str, url: Url = DEFAULT_URL, as_json: AsJson = False) -> None:
    """Item counts of one queue, per partition and in total."""
    with _reporting(), _store(url) as q:
        stats = q.stats(name)
        info = q.get_queue(name)
    if as_json:
        typer.echo(stats.model_dump_json())
        return
    typer.echo(f"expiry: {_expiry(info.settings)}")
    if info.paused:
        typer.echo("paused: its items are not leased until `querator queues resume`")
    rows = [["PARTITION", "TOTAL", "LEASED", "SCHEDULED", "DEAD_LETTERED", "OLDEST_AGE"]]
    for p in stats.partitions:
        age = f"{p.oldest_age:.1f}s" if p.oldest_age is not None else "-"
        rows.append([str(p.partition), str(p.total), str(p.leased), str(p.scheduled)])
        rows[-1] += [str(p.dead_lettered), age]
    parts = stats.partitions
    totals = [sum(p.total for p in parts), sum(p.leased for p in parts)]
    totals += [sum(p.scheduled for p in parts), sum(p.dead_lettered for p in parts)]
    rows.append(["all", *(str(t) for t in totals), "-"])
    _table(rows)


@queues_app.command("delete")
def queues_delete(
    name: str,
    force: Annotated[bool, typer.Option(help="Delete the items the queue holds with it.")] = False,
    url: Url = DEFAULT_URL,
) -> None:
    """Delete queue NAME; one that still holds items only with --force."""
    with _reporting(), _store(url) as q:
        q.delete_queue(name, force=force)
    typer.echo(f"{name}: deleted")


@queues_app.command("pause")
def queues_pause(name: str, url: Url = DEFAULT_URL) -> None:
    """Pause queue NAME: its items are not leased until it is resumed (produce
    still adds items; leases already held stay held)."""
    with _reporting(), _store(url) as q:
        q.pause_queue(name)
    typer.echo(f"{name}: paused")


@queues_app.command("resume")
def queues_resume(name: str, url: Url = DEFAULT_URL) -> None:
    """Resume queue NAME: its items are leased again."""
    with _reporting(), _store(url) as q:
        q.resume_queue(name)
    typer.echo(f"{name}: resumed")


def _expiry(settings: QueueSettings) -> str:
    """How long the queue keeps items, and dead letters, in words."""
    kept = settings.dead_letter_expiry
    letters = "kept until requeued or purged" if kept is None else f"expire after {kept:g}s"
    return (
        f"items {settings.expire_timeout:g}s after they become available;"
        f" dead letters arriving here {letters}"
    )


def _reason(item: StoredItem, width: int = 60) -> str:
    text = " ".join(item.headers.get(REASON_HEADER, "-").split())
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def _expires(item: StoredItem) -> str:
    return "never" if item.expire_at >= KEPT else _when(item.expire_at)


def _excerpt(payload: bytes, width: int = 60) -> str:
    text = payload.decode("utf-8", errors="replace").replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


@dead_app.command("list")
def dead_list(
    queue: str,
    limit: Annotated[int, typer.Option(help="At most this many.")] = 100,
    url: Url = DEFAULT_URL,
    as_json: AsJson = False,
) -> None:
    """The dead letters of QUEUE (the items of its dead_queue), oldest first."""
    with _reporting(), _store(url) as q:
        items = dead_letters(q, queue)
    if as_json:
        _json_list(items[:limit], exclude={"payload"})
        return
    typer.echo(f"{queue}: {len(items)} dead letter(s)")
    if items:
        header = ["ID", "FROM", "SOURCE_ID", "KIND", "ATTEMPTS", "DEAD SINCE", "EXPIRES"]
        rows = [[*header, "REASON", "PAYLOAD"]]
        for item in items[:limit]:
            attempts = item.headers.get(ATTEMPTS_HEADER, str(item.attempts))
            source = source_queue(item.headers) or "?"
            rows.append([item.id, source, item.source_id or "-", item.kind or "-", attempts])
            rows[-1] += [_when(item.created_at), _expires(item), _reason(item)]
            rows[-1].append(_excerpt(item.payload))
        _table(rows)


@dead_app.command("show")
def dead_show(queue: str, item_id: str, url: Url = DEFAULT_URL) -> None:
    """One dead letter of QUEUE in full (JSON; the payload as text)."""
    with _reporting(), _store(url) as q:
        item = next((i for i in dead_letters(q, queue) if i.id == item_id), None)
        if item is None:
            raise InvalidArgument("item_id", f"{item_id!r} is not a dead letter of {queue!r}")
    shown = json.loads(item.model_dump_json(exclude={"payload"}))
    shown["payload"] = item.payload.decode("utf-8", errors="replace")
    typer.echo(json.dumps(shown, indent=2))


def _ids(item_ids: list[str] | None, everything: bool) -> list[str] | None:
    if everything == bool(item_ids):
        raise InvalidArgument("item_ids", "name dead letters, or pass --all (not both)")
    return None if everything else list(item_ids or [])


AllOption = Annotated[bool, typer.Option("--all", help="Every dead letter of QUEUE.")]
ItemIds = Annotated[list[str] | None, typer.Argument(metavar="[ITEM_ID]...")]


@dead_app.command("requeue")
def dead_requeue(
    queue: str, item_ids: ItemIds = None, everything: AllOption = False, url: Url = DEFAULT_URL
) -> None:
    """Send dead letters back into QUEUE (fresh attempts)."""
    with _reporting(), _store(url) as q:
        moved = requeue(q, queue, _ids(item_ids, everything))
    typer.echo(f"{queue}: {moved} dead letter(s) requeued")


@dead_app.command("purge")
def dead_purge(
    queue: str, item_ids: ItemIds = None, everything: AllOption = False, url: Url = DEFAULT_URL
) -> None:
    """Delete dead letters of QUEUE for good."""
    with _reporting(), _store(url) as q:
        gone = purge(q, queue, _ids(item_ids, everything))
    typer.echo(f"{queue}: {gone} dead letter(s) purged")


@app.command()
def health(
    url: Url = DEFAULT_URL,
    max_age: Annotated[
        float | None,
        typer.Option(help="Unhealthy when a queue's oldest item is older (seconds)."),
    ] = None,
    require_sync_replication: Annotated[
        bool,
        typer.Option(
            help="Unhealthy unless PostgreSQL commits wait for a synchronous standby"
            " (synchronous_commit on or remote_apply, and such a standby streaming)."
        ),
    ] = False,
    unserved_after: Annotated[
        float,
        typer.Option(
            help="Unhealthy when a workflow or step item no live worker serves "
            "waited longer (seconds)."
        ),
    ] = UNSERVED_GRACE,
    as_json: AsJson = False,
) -> None:
    """Check the store for a probe: reachable, its queues, the oldest item's age,
    workflow and step items that no live worker serves (and, asked, its
    replication). Exit status 0 when healthy, 1 when the store is unreachable, an
    item is older than --max-age, items waited longer than --unserved-after for a
    workflow or step that no live worker serves, or --require-sync-replication
    finds commits that a failover could lose."""
    with _reporting():
        check_duration("--unserved-after", unserved_after, allow_zero=True)
    report: dict[str, Any] = {"store": "unreachable", "queues": 0, "oldest_age": None}
    if require_sync_replication:
        report["replication"] = _replication(url)
    try:
        with _store(url) as q:
            names = [info.name for info in q.list_queues(limit=1000)]
            ages = [
                p.oldest_age
                for name in names
                for p in q.stats(name).partitions
                if p.oldest_age is not None and p.total > p.dead_lettered
            ]
            unserved = q.call(unserved_items, q.aio, grace=unserved_after)
        report.update(store="reachable", queues=len(names), oldest_age=max(ages, default=None))
        report["unserved"] = [u.model_dump(mode="json") for u in unserved]
    except QueratorError as exc:
        report["error"] = str(exc)
    oldest = report["oldest_age"]
    healthy = (
        report["store"] == "reachable"
        and (max_age is None or oldest is None or oldest <= max_age)
        and not report.get("unserved")
    )
    if require_sync_replication:
        healthy = healthy and bool(report["replication"].get("synchronous"))
    report["healthy"] = healthy
    if as_json:
        typer.echo(json.dumps(report))
    else:
        for key, value in report.items():
            shown = len(value) if key == "unserved" else value
            typer.echo(f"{key + ':':<12}{shown}")
        for entry in report.get("unserved", []):
            since = entry["waiting_since"]
            typer.echo(f"unserved:   {entry['items']} item(s) since {since}: {entry['reason']}")
    if not healthy:
        raise typer.Exit(1)


def _replication(url: str) -> dict[str, Any]:
    """What the store's replication guarantees (``synchronous``: nothing acknowledged
    is lost in a failover); a store that is not PostgreSQL has no standby."""
    if not url.startswith(("postgresql", "postgres")):
        return {"synchronous": False, "error": "not a PostgreSQL store: no replication"}
    import psycopg

    from querator.queue.backends.postgres.dsn import split_dsn
    from querator.queue.backends.postgres.replication import replication_report

    try:
        return replication_report(split_dsn(url, "querator").conninfo)
    except (psycopg.Error, QueratorError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return {"synchronous": False, "error": first}
