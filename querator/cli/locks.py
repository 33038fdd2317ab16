"""``querator locks``: semaphores and locks, with who holds them."""

from __future__ import annotations

import typer

from querator.cli.app import AsJson, Url, _reporting, _store, app
from querator.cli.help_format import CliGroup
from querator.cli.output import _json_list, _table, _when
from querator.locks import list_semaphores
from querator.queue.options import DEFAULT_URL

locks_app = typer.Typer(cls=CliGroup, no_args_is_help=True, help="Locks and semaphores.")
app.add_typer(locks_app, name="locks")


@locks_app.command("list")
def locks_list(url: Url = DEFAULT_URL, as_json: AsJson = False) -> None:
    """Every semaphore with its limit, free permits, holders (client id, since
    when, permit, token now: at least the holder's fencing token) and waiters
    (client id, since when, in the order they will be served)."""
    with _reporting(), _store(url) as q:
        found = list_semaphores(q)
    if as_json:
        _json_list(found)
        return
    rows = [["NAME", "LIMIT", "FREE", "CLIENT", "STATE", "SINCE", "PERMIT", "TOKEN", "DEADLINE"]]
    for info in found:
        head = [info.name, str(info.limit), str(info.free)]
        if not info.holders and not info.waiters:
            rows.append([*head, "-", "-", "-", "-", "-", "-"])
        for holder in info.holders:
            rows.append(
                [
                    *head,
                    holder.client_id,
                    "holds",
                    _when(holder.since),
                    str(holder.permit),
                    str(holder.token),
                    _when(holder.lease_deadline),
                ]
            )
        for place, waiter in enumerate(info.waiters, 1):
            when = _when(waiter.since)
            rows.append([*head, waiter.client_id, f"waits#{place}", when, "-", "-", "-"])
    _table(rows)
