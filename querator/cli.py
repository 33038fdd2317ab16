"""The ``querator`` command: run workers, inspect runs and queues.

```
querator worker myapp.flows [--url URL] [--concurrency N]   # until SIGTERM/SIGINT
querator worker myapp.flows:FUNCTIONS                       # only the functions listed there
querator worker path/to/flows.py
querator runs list [--status failed] [--name shop.checkout] [--limit 50] [--after RUN_ID]
querator runs show RUN_ID
querator runs cancel RUN_ID [--reason TEXT]
querator runs retry-compensation RUN_ID      # re-drive a compensation_failed saga
querator runs resume RUN_ID                  # a failed or cancelled run, from its failed step
querator runs fork RUN_ID --from-step N      # a new run keeping steps 0 … N-1
querator runs replay RUN_ID... --app myapp.flows   # check new code against stored runs
querator runs replay --running --app myapp.flows   # ... against every running run
querator queues list
querator queues stats NAME
querator dead list QUEUE [--limit N]         # dead letters of QUEUE (its dead_queue), with a count
querator dead show QUEUE ITEM_ID
querator dead requeue QUEUE [ITEM_ID...] [--all]   # back into QUEUE
querator dead purge QUEUE [ITEM_ID...] [--all]
querator schedules list | show NAME | pause NAME | resume NAME | trigger NAME | delete NAME
querator health [--max-age SECONDS]          # for probes: exit 1 when unhealthy
```

The store is ``--url``, else ``$QUERATOR_URL``, else ``sqlite:///querator.db``.
Errors of the ``querator.errors`` hierarchy are printed on stderr and end the
command with exit status 1 (2 for a bad argument).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import typer

from querator.errors import InvalidArgument, QueratorError
from querator.queue.backends import DEFAULT_URL
from querator.queue.client import Querator
from querator.queue.dead_letters import dead_letters, purge, requeue
from querator.workflows.checking import ReplayCheck, check_replay
from querator.workflows.cron.api import (
    delete_schedule,
    get_schedule,
    list_schedules,
    pause_schedule,
    resume_schedule,
    trigger_schedule,
)
from querator.workflows.engine.live import DEFAULT_MAX_LIVE_RUNS
from querator.workflows.engine.worker import DEFAULT_SHUTDOWN_GRACE, Worker
from querator.workflows.errors import RunNotFound
from querator.workflows.functions import DurableFunction, StepFunction, WorkflowFunction
from querator.workflows.inspection import RunInfo, get_run, list_runs
from querator.workflows.rerun import fork, resume
from querator.workflows.runs import RunHandle, RunStatus

__all__ = ["app", "load_functions", "main"]

app = typer.Typer(
    name="querator", no_args_is_help=True, help="Workflows and sagas on a versioned lease queue."
)
runs_app = typer.Typer(no_args_is_help=True, help="Inspect workflow runs.")
queues_app = typer.Typer(no_args_is_help=True, help="Inspect queues.")
app.add_typer(runs_app, name="runs")
app.add_typer(queues_app, name="queues")
dead_app = typer.Typer(no_args_is_help=True, help="Dead letters of a queue.")
schedules_app = typer.Typer(no_args_is_help=True, help="Cron schedules.")
app.add_typer(schedules_app, name="schedules")
app.add_typer(dead_app, name="dead")

Url = Annotated[
    str,
    typer.Option("--url", envvar="QUERATOR_URL", help="Store URL (postgresql://, sqlite:///, …)."),
]
AsJson = Annotated[bool, typer.Option("--json", help="One JSON document per line.")]


@contextmanager
def _reporting() -> Iterator[None]:
    """Turn querator errors into a message on stderr and an exit status."""
    try:
        yield
    except (InvalidArgument, RunNotFound) as exc:  # what the user named is wrong
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    except QueratorError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


def _import(module: str) -> ModuleType:
    if module.endswith(".py") or os.sep in module:
        path = Path(module).resolve()
        if not path.is_file():
            raise InvalidArgument("module", f"no file {module!r}")
        sys.path.insert(0, str(path.parent))
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise InvalidArgument("module", f"cannot import {module!r}")
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = loaded
        spec.loader.exec_module(loaded)
        return loaded
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: modules of the current directory
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise InvalidArgument("module", f"cannot import {module!r}: {exc}") from exc


def load_functions(target: str) -> list[DurableFunction]:
    """The ``@step``/``@workflow`` functions named by ``MODULE[:ATTR]``.

    ``MODULE`` is a dotted module name (found from the current directory too)
    or a ``.py`` file path. Without ``ATTR``: every step and workflow defined
    in or imported into the module. With ``ATTR`` (dotted): that function, or
    the functions of that list/tuple.
    """
    module_name, _, attr = target.partition(":")
    module = _import(module_name)
    if not attr:
        found: Any = list(vars(module).values())
    else:
        found = module
        for part in attr.split("."):
            if not hasattr(found, part):
                raise InvalidArgument("module", f"{module_name!r} has no attribute {attr!r}")
            found = getattr(found, part)
        if isinstance(found, StepFunction | WorkflowFunction):
            found = [found]
        elif not isinstance(found, list | tuple | set | frozenset):
            raise InvalidArgument("module", f"{attr!r} is neither a function nor a list of them")
    functions: dict[int, DurableFunction] = {}
    for obj in found:
        if isinstance(obj, StepFunction | WorkflowFunction):
            functions.setdefault(id(obj), obj)
        elif attr:
            raise InvalidArgument("module", f"{obj!r} in {attr!r} is not a @step or @workflow")
    if not functions:
        raise InvalidArgument("module", f"no @step or @workflow function in {target!r}")
    return list(functions.values())


@app.command()
def worker(
    target: Annotated[
        str, typer.Argument(metavar="MODULE[:ATTR]", help="Where the functions are.")
    ],
    url: Url = DEFAULT_URL,
    concurrency: Annotated[int, typer.Option(help="Items handled at once.")] = 8,
    client_id: Annotated[str | None, typer.Option(help="Lease owner name.")] = None,
    shutdown_grace: Annotated[
        float, typer.Option(help="Seconds in-flight items may finish after SIGTERM.")
    ] = DEFAULT_SHUTDOWN_GRACE,
    max_live_runs: Annotated[
        int, typer.Option(help="Workflow bodies kept live between their steps.")
    ] = DEFAULT_MAX_LIVE_RUNS,
    wait_for_store: Annotated[
        bool,
        typer.Option(help="Wait for an unreachable store at start-up instead of failing."),
    ] = True,
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "INFO",
) -> None:
    """Serve the workflows of MODULE and the steps they call (and the steps of
    MODULE) until SIGTERM or SIGINT."""
    logging.basicConfig(
        level=log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    with _reporting():
        functions = load_functions(target)
        names = ", ".join(sorted(f.name for f in functions))
        logging.getLogger("querator.worker").info("registering %s", names)
        wait = WORKER_STORE_WAIT if wait_for_store else 0.0
        with Querator(url, wait_for_store=wait) as q:
            Worker(
                q,
                functions,
                concurrency=concurrency,
                client_id=client_id,
                shutdown_grace=shutdown_grace,
                max_live_runs=max_live_runs,
            ).run()


WORKER_STORE_WAIT = 366 * 86400.0
"""How long ``querator worker`` waits for an unreachable store at start-up (for ever)."""


def _when(value: Any) -> str:
    return value.isoformat(timespec="seconds") if value is not None else "-"


def _table(rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


@runs_app.command("list")
def runs_list(
    status: Annotated[str | None, typer.Option(help="Only runs with this status.")] = None,
    name: Annotated[str | None, typer.Option(help="Only runs of this workflow.")] = None,
    after: Annotated[str | None, typer.Option(help="Start after this run id.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many runs.")] = 100,
    url: Url = DEFAULT_URL,
    as_json: AsJson = False,
) -> None:
    """List runs in start order: id, status, workflow, started, finished."""
    with _reporting(), Querator(url) as q:
        runs = list_runs(q, status=_status(status), name=name, after=after, limit=limit)
    if as_json:
        for run in runs:
            typer.echo(run.model_dump_json(exclude={"steps"}))
        return
    header = ["RUN_ID", "STATUS", "WORKFLOW", "STARTED", "FINISHED"]
    rows = [
        [r.run_id, r.status, r.workflow, _when(r.started_at), _when(r.finished_at)] for r in runs
    ]
    _table([header, *rows])


def _status(status: str | None) -> RunStatus | None:
    # list_runs validates the value; the cast only narrows the type.
    return status  # type: ignore[return-value]


def _show(run: RunInfo) -> None:
    fields = {
        "run": run.run_id,
        "workflow": run.workflow,
        "status": run.status + (" (cancel requested)" if run.cancel_requested else ""),
        "queue": run.queue,
        "started": _when(run.started_at),
        "finished": _when(run.finished_at),
        "args": run.args,
    }
    if run.parent_run_id:
        fields["parent"] = run.parent_run_id
    if run.result is not None:
        fields["result"] = run.result
    if run.error_type is not None:
        fields["error"] = f"{run.error_type}: {run.error_message}"
    for key, value in fields.items():
        typer.echo(f"{key + ':':<10}{value}")
    if run.in_progress:
        typer.echo("in progress:")
        rows = [["POS", "ATTEMPT", "UPDATED", "PROGRESS"]]
        for p in run.in_progress:
            rows.append([str(p.position), str(p.attempt), _when(p.updated_at)])
            rows[-1].append(json.dumps(p.progress, separators=(",", ":")))
        _table(rows)
    if not run.steps:
        _tracebacks(run)
        return
    typer.echo("steps:")
    rows = [["POS", "STEP", "OUTCOME", "ATTEMPTS", "FINISHED", "RESULT / ERROR"]]
    for s in run.steps:
        detail = s.result if s.ok else f"{s.error_type}: {s.error_message}"
        outcome = "ok" if s.ok else "error"
        rows.append([str(s.position), s.step, outcome, str(s.attempts), _when(s.finished_at)])
        rows[-1].append(detail or "")
    _table(rows)
    _tracebacks(run)


def _tracebacks(run: RunInfo) -> None:
    """The stored tracebacks of the failed steps and of the body's error."""
    for s in run.steps:
        if s.error_traceback:
            typer.echo(f"traceback of step {s.step}@{s.position}:")
            typer.echo(s.error_traceback.rstrip())
    if run.error_traceback:
        typer.echo("traceback of the run's error:")
        typer.echo(run.error_traceback.rstrip())


@runs_app.command("show")
def runs_show(run_id: str, url: Url = DEFAULT_URL, as_json: AsJson = False) -> None:
    """Show one run and its steps (position, name, outcome, attempts, result or error)."""
    with _reporting(), Querator(url) as q:
        run = get_run(q, run_id)
    if as_json:
        typer.echo(run.model_dump_json())
    else:
        _show(run)


@runs_app.command("cancel")
def runs_cancel(
    run_id: str,
    url: Url = DEFAULT_URL,
    reason: Annotated[str, typer.Option(help="Why, for the run's history.")] = "",
) -> None:
    """Ask a run to end as cancelled (a saga compensates first)."""
    with _reporting(), Querator(url) as q:
        get_run(q, run_id)  # an unknown run id is an error, not a silent no-op
        cancelled = RunHandle(q, run_id).cancel(reason)
    typer.echo(f"{run_id}: {'cancel requested' if cancelled else 'already ended'}")
    if not cancelled:
        raise typer.Exit(1)


@runs_app.command("retry-compensation")
def runs_retry_compensation(run_id: str, url: Url = DEFAULT_URL) -> None:
    """Run the failed compensation of a compensation_failed saga again."""
    with _reporting(), Querator(url) as q:
        get_run(q, run_id)
        redriven = RunHandle(q, run_id).retry_compensation()
    typer.echo(f"{run_id}: {'compensating again' if redriven else 'not compensation_failed'}")
    if not redriven:
        raise typer.Exit(1)


@runs_app.command("resume")
def runs_resume(run_id: str, url: Url = DEFAULT_URL) -> None:
    """Run a failed or cancelled run again, same id, from its first failed step
    (the steps before it keep their results)."""
    with _reporting(), Querator(url) as q:
        resumed = resume(q, run_id)
    typer.echo(f"{run_id}: {'resumed' if resumed else 'not failed or cancelled'}")
    if not resumed:
        raise typer.Exit(1)


@runs_app.command("fork")
def runs_fork(
    run_id: str,
    from_step: Annotated[int, typer.Option(help="The first position to run again.")],
    url: Url = DEFAULT_URL,
) -> None:
    """Start a new run of RUN_ID's workflow and arguments that keeps the results
    of its steps before --from-step; prints the new run's id."""
    with _reporting(), Querator(url) as q:
        handle = fork(q, run_id, from_step)
    typer.echo(handle.run_id)


def _replay_line(check: ReplayCheck) -> str:
    if check.ok:
        end = "ran to its end" if check.ended else "waits for what comes next"
        return f"{check.run_id}  ok  {check.workflow}: {check.replayed} stored step(s), {end}"
    return f"{check.run_id}  NonDeterminism  {check.workflow}: {check.error}"


@runs_app.command("replay")
def runs_replay(
    run_ids: Annotated[list[str] | None, typer.Argument(metavar="[RUN_ID]...")] = None,
    app_target: Annotated[
        str,
        typer.Option("--app", metavar="MODULE[:ATTR]", help="Where the (new) workflow code is."),
    ] = "",
    running: Annotated[
        bool, typer.Option("--running", help="Also every running run of those workflows.")
    ] = False,
    url: Url = DEFAULT_URL,
    as_json: AsJson = False,
) -> None:
    """Replay stored runs with the workflow code of --app, dispatching nothing, and
    report any that the code no longer matches (exit status 1 if one does)."""
    with _reporting():
        if not app_target:
            raise InvalidArgument("app", "is required: --app MODULE[:ATTR]")
        functions = load_functions(app_target)
        names = {fn.name for fn in functions if isinstance(fn, WorkflowFunction)}
        with Querator(url) as q:
            wanted = list(run_ids or [])
            if running:
                listed = _running_runs(q)
                wanted += [r.run_id for r in listed if r.workflow in names]
            if not wanted:
                raise InvalidArgument("run_ids", "name at least one run, or pass --running")
            checks = [check_replay(q, run_id, functions) for run_id in wanted]
    for check in checks:
        typer.echo(check.model_dump_json() if as_json else _replay_line(check))
    if not all(check.ok for check in checks):
        raise typer.Exit(1)


def _running_runs(q: Querator) -> list[RunInfo]:
    """Every running run, page by page."""
    found: list[RunInfo] = []
    after: str | None = None
    while True:
        page = list_runs(q, status="running", after=after, limit=500)
        found += page
        if len(page) < 500:
            return found
        after = page[-1].run_id


@queues_app.command("list")
def queues_list(url: Url = DEFAULT_URL, as_json: AsJson = False) -> None:
    """List queues with their main settings."""
    with _reporting(), Querator(url) as q:
        queues, pivot = [], None
        while page := [i for i in q.list_queues(pivot=pivot, limit=100) if i.name != pivot]:
            queues.extend(page)
            pivot = page[-1].name
    if as_json:
        for info in queues:
            typer.echo(info.model_dump_json())
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
    with _reporting(), Querator(url) as q:
        stats = q.stats(name)
    if as_json:
        typer.echo(stats.model_dump_json())
        return
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
    with _reporting(), Querator(url) as q:
        items = dead_letters(q, queue)
    if as_json:
        for item in items[:limit]:
            typer.echo(item.model_dump_json(exclude={"payload"}))
        return
    typer.echo(f"{queue}: {len(items)} dead letter(s)")
    if items:
        rows = [["ID", "SOURCE_ID", "KIND", "ATTEMPTS", "DEAD SINCE", "PAYLOAD"]]
        for item in items[:limit]:
            rows.append([item.id, item.source_id or "-", item.kind or "-", str(item.attempts)])
            rows[-1] += [_when(item.created_at), _excerpt(item.payload)]
        _table(rows)


@dead_app.command("show")
def dead_show(queue: str, item_id: str, url: Url = DEFAULT_URL) -> None:
    """One dead letter of QUEUE in full (JSON; the payload as text)."""
    with _reporting(), Querator(url) as q:
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
    with _reporting(), Querator(url) as q:
        moved = requeue(q, queue, _ids(item_ids, everything))
    typer.echo(f"{queue}: {moved} dead letter(s) requeued")


@dead_app.command("purge")
def dead_purge(
    queue: str, item_ids: ItemIds = None, everything: AllOption = False, url: Url = DEFAULT_URL
) -> None:
    """Delete dead letters of QUEUE for good."""
    with _reporting(), Querator(url) as q:
        gone = purge(q, queue, _ids(item_ids, everything))
    typer.echo(f"{queue}: {gone} dead letter(s) purged")


@schedules_app.command("list")
def schedules_list(url: Url = DEFAULT_URL, as_json: AsJson = False) -> None:
    """Every schedule: workflow, cron, next fire, paused, last run and its status."""
    with _reporting(), Querator(url) as q:
        infos = list_schedules(q)
    if as_json:
        for info in infos:
            typer.echo(info.model_dump_json())
        return
    rows = [["NAME", "WORKFLOW", "CRON", "TZ", "NEXT", "PAUSED", "LAST RUN", "STATUS"]]
    for i in infos:
        rows.append([i.name, i.workflow, i.cron, i.tz, _when(i.next_fire), str(i.paused)])
        rows[-1] += [i.last_run_id or "-", i.last_run_status or "-"]
    _table(rows)


@schedules_app.command("show")
def schedules_show(name: str, url: Url = DEFAULT_URL) -> None:
    """One schedule (JSON)."""
    with _reporting(), Querator(url) as q:
        typer.echo(get_schedule(q, name).model_dump_json(indent=2))


@schedules_app.command("pause")
def schedules_pause(
    name: str,
    note: Annotated[str, typer.Option(help="Why, shown by list.")] = "",
    url: Url = DEFAULT_URL,
) -> None:
    """Stop firing NAME until resumed."""
    with _reporting(), Querator(url) as q:
        pause_schedule(q, name, note)
    typer.echo(f"{name}: paused")


@schedules_app.command("resume")
def schedules_resume(name: str, url: Url = DEFAULT_URL) -> None:
    """Fire NAME again (missed ticks follow its catch-up policy)."""
    with _reporting(), Querator(url) as q:
        resume_schedule(q, name)
    typer.echo(f"{name}: resumed")


@schedules_app.command("trigger")
def schedules_trigger(name: str, url: Url = DEFAULT_URL) -> None:
    """Start a run of NAME now; prints its run id."""
    with _reporting(), Querator(url) as q:
        typer.echo(trigger_schedule(q, name).run_id)


@schedules_app.command("delete")
def schedules_delete(name: str, url: Url = DEFAULT_URL) -> None:
    """Delete NAME (its runs are untouched)."""
    with _reporting(), Querator(url) as q:
        deleted = delete_schedule(q, name)
    typer.echo(f"{name}: {'deleted' if deleted else 'no such schedule'}")
    if not deleted:
        raise typer.Exit(1)


@app.command()
def health(
    url: Url = DEFAULT_URL,
    max_age: Annotated[
        float | None,
        typer.Option(help="Unhealthy when a queue's oldest item is older (seconds)."),
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Check the store for a probe: reachable, its queues, the oldest item's age.
    Exit status 0 when healthy, 1 when the store is unreachable or an item is
    older than --max-age."""
    report: dict[str, Any] = {"store": "unreachable", "queues": 0, "oldest_age": None}
    try:
        with Querator(url) as q:
            names = [info.name for info in q.list_queues(limit=1000)]
            ages = [
                p.oldest_age
                for name in names
                for p in q.stats(name).partitions
                if p.oldest_age is not None and p.total > p.dead_lettered
            ]
        report.update(store="reachable", queues=len(names), oldest_age=max(ages, default=None))
    except QueratorError as exc:
        report["error"] = str(exc)
    oldest = report["oldest_age"]
    healthy = report["store"] == "reachable" and (
        max_age is None or oldest is None or oldest <= max_age
    )
    report["healthy"] = healthy
    if as_json:
        typer.echo(json.dumps(report))
    else:
        for key, value in report.items():
            typer.echo(f"{key + ':':<12}{value}")
    if not healthy:
        raise typer.Exit(1)


def main() -> None:
    """Entry point of the ``querator`` script."""
    app()


if __name__ == "__main__":
    main()
