"""``querator schedules``: list, show, pause, resume, trigger, delete."""

from __future__ import annotations

from typing import Annotated

import typer

from querator.cli import (
    AsJson,
    Url,
    _json_list,
    _reporting,
    _store,
    _table,
    _when,
    schedules_app,
)
from querator.queue.backends import DEFAULT_URL
from querator.workflows.cron.api import (
    delete_schedule,
    get_schedule,
    list_schedules,
    pause_schedule,
    resume_schedule,
    trigger_schedule,
)


@schedules_app.command("list")
def schedules_list(url: Url = DEFAULT_URL, as_json: AsJson = False) -> None:
    """Every schedule: workflow, cron, next fire, paused, last run and its status."""
    with _reporting(), _store(url) as q:
        infos = list_schedules(q)
    if as_json:
        _json_list(infos)
        return
    rows = [["NAME", "WORKFLOW", "CRON", "TZ", "NEXT", "PAUSED", "LAST RUN", "STATUS"]]
    for i in infos:
        rows.append([i.name, i.workflow, i.cron, i.tz, _when(i.next_fire), str(i.paused)])
        status = i.last_run_status or "-"
        rows[-1] += [i.last_run_id or "-", status + (" ORPHAN" if i.orphan else "")]
    _table(rows)
    for i in infos:
        if i.orphan:
            typer.echo(
                f"ORPHAN {i.name}: no live worker serves {i.workflow!r}, its runs wait "
                f"(pause it: querator schedules pause {i.name})",
                err=True,
            )


@schedules_app.command("show")
def schedules_show(name: str, url: Url = DEFAULT_URL) -> None:
    """One schedule (JSON)."""
    with _reporting(), _store(url) as q:
        typer.echo(get_schedule(q, name).model_dump_json(indent=2))


@schedules_app.command("pause")
def schedules_pause(
    name: str,
    note: Annotated[str, typer.Option(help="Why, shown by list.")] = "",
    url: Url = DEFAULT_URL,
) -> None:
    """Stop firing NAME until resumed."""
    with _reporting(), _store(url) as q:
        pause_schedule(q, name, note)
    typer.echo(f"{name}: paused")


@schedules_app.command("resume")
def schedules_resume(name: str, url: Url = DEFAULT_URL) -> None:
    """Fire NAME again (missed ticks follow its catch-up policy)."""
    with _reporting(), _store(url) as q:
        resume_schedule(q, name)
    typer.echo(f"{name}: resumed")


@schedules_app.command("trigger")
def schedules_trigger(name: str, url: Url = DEFAULT_URL) -> None:
    """Start a run of NAME now; prints its run id."""
    with _reporting(), _store(url) as q:
        typer.echo(trigger_schedule(q, name).run_id)


@schedules_app.command("delete")
def schedules_delete(name: str, url: Url = DEFAULT_URL) -> None:
    """Delete NAME (its runs are untouched)."""
    with _reporting(), _store(url) as q:
        deleted = delete_schedule(q, name)
    typer.echo(f"{name}: {'deleted' if deleted else 'no such schedule'}")
    if not deleted:
        raise typer.Exit(1)
