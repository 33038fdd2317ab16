"""``querator schedules``: create, list, show, pause, resume, trigger, delete."""

from __future__ import annotations

from typing import Annotated

import typer

from querator.cli.app import AsJson, Url, _reporting, _store, schedules_app
from querator.cli.output import _json_list, _table, _when
from querator.cli.start import WorkflowApp, _arguments, _workflow
from querator.errors import InvalidArgument
from querator.queue.options import DEFAULT_URL
from querator.workflows.cron.api import (
    ScheduleOptions,
    delete_schedule,
    get_schedule,
    list_schedules,
    pause_schedule,
    resume_schedule,
    schedule,
    trigger_schedule,
)

FLAGS = {
    **{name: f"--{name}" for name in ("cron", "tz", "catchup", "overlap", "jitter", "queue")},
    "args": "--args",
    "kwargs": "--args",
}
"""The options of ``schedule()`` that ``schedules create`` spells as flags."""


@schedules_app.command("create")
def schedules_create(
    name: Annotated[str, typer.Argument(help="The schedule's name (unique in the store).")],
    workflow: Annotated[str, typer.Argument(help="The workflow's persisted name.")],
    app_target: WorkflowApp,
    cron: Annotated[
        str, typer.Option(help="5 fields, or 6 with seconds first ('*/10 * * * * *').")
    ],
    tz: Annotated[str, typer.Option(help="IANA time zone of the cron expression.")] = "UTC",
    args: Annotated[
        str, typer.Option(help="Each run's arguments as JSON: an array or an object (by name).")
    ] = "[]",
    catchup: Annotated[str, typer.Option(help="skip, latest or all.")] = "skip",
    overlap: Annotated[
        str,
        typer.Option(
            help="skip, buffer_one, buffer_all, cancel_other, terminate_other or allow_all."
        ),
    ] = "skip",
    jitter: Annotated[float, typer.Option(help="Each run starts up to this many s late.")] = 0.0,
    queue: Annotated[
        str | None, typer.Option(help="The runs' workflow queue (default: the workflow's).")
    ] = None,
    url: Url = DEFAULT_URL,
) -> None:
    """Create NAME (or redefine it, keeping its progress): start WORKFLOW at every
    tick of --cron. Workers serving WORKFLOW fire it (or `querator scheduler`)."""
    with _reporting():
        fn = _workflow(workflow, app_target)
        positional, named = _arguments(args)
        options: ScheduleOptions = {
            "tz": tz,
            "args": tuple(positional),
            "kwargs": named,
            "catchup": catchup,
            "overlap": overlap,
            "jitter": jitter,
            "queue": queue,
        }
        with _store(url) as q:
            try:
                schedule(q, name, fn, cron=cron, **options)
            except InvalidArgument as exc:  # an option named as the command line spells it
                flag = FLAGS.get(exc.field, exc.field)
                raise InvalidArgument(flag, exc.rule) from None
            info = get_schedule(q, name)
    typer.echo(f"{name}: {workflow} at {cron} ({tz}), next {_when(info.next_fire)}")


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
        upcoming = "BROKEN" if i.broken else _when(i.next_fire)
        rows.append([i.name, i.workflow, i.cron, i.tz, upcoming, str(i.paused)])
        status = i.last_run_status or "-"
        rows[-1] += [i.last_run_id or "-", status + (" ORPHAN" if i.orphan else "")]
    _table(rows)
    for i in infos:
        if i.broken:
            typer.echo(
                f"BROKEN {i.name}: {i.broken}; never fires (redefine it, or delete it: "
                f"querator schedules delete {i.name})",
                err=True,
            )
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
