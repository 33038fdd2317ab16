"""``querator runs``: inspect, cancel, resume, fork and replay-check runs."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

from querator.cli.app import AsJson, Url, _reporting, _store, runs_app
from querator.cli.loading import load_functions
from querator.cli.output import _json_list, _table, _when, json_argument
from querator.errors import InvalidArgument
from querator.queue.client import QueueClient
from querator.queue.options import DEFAULT_URL
from querator.workflows.attributes import parse_condition
from querator.workflows.checking import ReplayCheck, check_replay
from querator.workflows.functions import WorkflowFunction
from querator.workflows.inspection import RunInfo, get_run, list_runs
from querator.workflows.messages import send
from querator.workflows.reindex import reindex_runs
from querator.workflows.rerun import fork, resume
from querator.workflows.retention import prune_messages, purge_runs
from querator.workflows.run_detail import WaitInfo
from querator.workflows.runs import RunHandle, RunStatus


@runs_app.command("list")
def runs_list(
    status: Annotated[str | None, typer.Option(help="Only runs with this status.")] = None,
    workflow: Annotated[str | None, typer.Option(help="Only runs of this workflow.")] = None,
    since: Annotated[
        str | None,
        typer.Option(help="Only runs started since: an age (30m, 2h, 7d) or an ISO time (UTC)."),
    ] = None,
    after: Annotated[str | None, typer.Option(help="The next page: after this run id.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many runs.")] = 100,
    where: Annotated[
        list[str] | None,
        typer.Option(
            help="Only runs with this search attribute: name=value (repeat for AND; "
            "1999, true, false are an integer or booleans, '\"1999\"' a string)."
        ),
    ] = None,
    url: Url = DEFAULT_URL,
    as_json: AsJson = False,
) -> None:
    """List runs newest first: id, status, workflow, started, finished."""
    with _reporting():
        since_at = _since(since)
        wanted = dict(parse_condition(text, "--where") for text in where or ())
        with _store(url) as q:
            runs = list_runs(
                q,
                status=_status(status),
                workflow=workflow,
                since=since_at,
                after=after,
                limit=limit,
                attributes=wanted or None,
            )
    if as_json:
        _json_list(runs, exclude={"steps", "progress", "in_progress"})
        return
    header = ["RUN_ID", "STATUS", "WORKFLOW", "STARTED", "FINISHED"]
    rows = [
        [r.run_id, r.status, r.workflow, _when(r.started_at), _when(r.finished_at)] for r in runs
    ]
    _table([header, *rows])


_AGE = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _since(text: str | None, option: str = "--since") -> datetime | None:
    """``--since`` (or ``--before``, ``option``): an age before now (``90s``, ``30m``,
    ``2h``, ``7d``) or an ISO time."""
    if text is None:
        return None
    age = _AGE.fullmatch(text.strip())
    if age is not None:
        return datetime.now(UTC) - timedelta(seconds=float(age[1]) * _UNIT[age[2]])
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidArgument(
            option, f"{text[:40]!r} is neither an age (30m, 2h, 7d) nor an ISO time"
        ) from None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


@runs_app.command("reindex")
def runs_reindex(url: Url = DEFAULT_URL) -> None:
    """Write the run-index entries of runs started by a querator without the index
    (they are not listed until then); safe to run again, and while workers run."""
    with _reporting(), _store(url) as q:
        seen = reindex_runs(q)
    typer.echo(f"{seen} run(s) indexed")


@runs_app.command("purge")
def runs_purge(
    before: Annotated[
        str,
        typer.Option(help="Runs that ended before: an age (30m, 2h, 7d) or an ISO time (UTC)."),
    ],
    status: Annotated[
        list[str] | None,
        typer.Option(help="Only runs with this finished status (repeatable; default: all)."),
    ] = None,
    workflow: Annotated[str | None, typer.Option(help="Only runs of this workflow.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many runs.")] = 100_000,
    url: Url = DEFAULT_URL,
) -> None:
    """Delete finished runs (records, history, index entries) that ended before
    --before; children whose parent has not ended are kept."""
    with _reporting():
        at = _since(before, "--before")
        assert at is not None  # --before is required
        statuses: list[RunStatus] | None = status or None  # type: ignore[assignment]
        with _store(url) as q:
            purged = purge_runs(q, before=at, status=statuses, workflow=workflow, limit=limit)
    typer.echo(f"{purged} run(s) purged")


@runs_app.command("prune-messages")
def runs_prune_messages(
    before: Annotated[
        str,
        typer.Option(help="Runs that ended before: an age (30m, 2h, 7d) or an ISO time (UTC)."),
    ],
    url: Url = DEFAULT_URL,
) -> None:
    """Delete the messages (read or not) of the runs that ended before --before,
    and those left by purged runs; running runs keep theirs (workers do it by
    themselves 7 days after a run's end)."""
    with _reporting():
        at = _since(before, "--before")
        assert at is not None  # --before is required
        with _store(url) as q:
            pruned = prune_messages(q, before=at)
    typer.echo(f"the messages of {pruned} run(s) pruned")


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
    if run.continued_from:
        fields["from"] = run.continued_from
    if run.continued_as:
        fields["next"] = run.continued_as
    if run.attributes:
        fields["attrs"] = json.dumps(run.attributes, sort_keys=True)
    if run.result is not None:
        fields["result"] = run.result
    if run.error_type is not None:
        fields["error"] = f"{run.error_type}: {run.error_message}"
    for key, value in fields.items():
        typer.echo(f"{key + ':':<10}{value}")
    for wait in run.waits:
        typer.echo(f"{'waits:':<10}{_wait_text(wait)}")
    for reason in run.waiting_for:  # due items that no live worker serves
        typer.echo(f"{'waiting:':<10}{reason}")
    for unread in run.unread:
        since = _when(unread.oldest_sent_at)
        text = f"{unread.count} message(s) on topic {unread.topic} since {since}"
        typer.echo(f"{'unread:':<10}{text}")
    if run.unread_more:
        typer.echo(f"{'unread:':<10}more messages than counted")
    _steps(run)
    _pending(run)
    _compensations(run)
    _children(run)
    _tracebacks(run)


_WAIT_WORDS = {
    "timer": "timer",
    "message": "message on topic",
    "event": "event",
    "child": "child run",
    "step": "step",
    "limit": "concurrency limit",
}


def _wait_text(wait: WaitInfo) -> str:
    """``event order:42.paid at 3 since … until …``: one thing a run waits for."""
    text = _WAIT_WORDS[wait.kind] + (f" {wait.name}" if wait.name else "")
    text += f" at {wait.position}"
    if wait.since is not None:
        text += f" since {_when(wait.since)}"
    if wait.until is not None:
        text += f" until {_when(wait.until)}"
    return text


def _steps(run: RunInfo) -> None:
    """The step calls that ended (a durable timer: until when it sleeps)."""
    if not run.steps:
        return
    typer.echo("steps:")
    rows = [["POS", "STEP", "OUTCOME", "ATTEMPTS", "FINISHED", "RESULT / ERROR"]]
    now = datetime.now(UTC)
    for s in run.steps:
        detail = s.result if s.ok else f"{s.error_type}: {s.error_message}"
        outcome = "ok" if s.ok else "error"
        if s.until is not None:
            asleep = run.finished_at is None and s.until > now
            outcome, detail = ("sleeping" if asleep else "slept"), f"until {_when(s.until)}"
        rows.append([str(s.position), s.step, outcome, str(s.attempts), _when(s.finished_at)])
        rows[-1].append(detail or "")
    _table(rows)


def _pending(run: RunInfo) -> None:
    """Step calls not ended: running (leased) or waiting, with their last progress."""
    if not run.pending and not run.progress:
        return
    typer.echo("pending:")
    progress = {p.position: p for p in run.progress}
    rows = [["POS", "STEP", "STATE", "ATTEMPT", "QUEUE", "PROGRESS"]]
    now = datetime.now(UTC)
    for p in run.pending:
        if p.leased_until is not None and p.leased_until > now:
            state = f"running (lease until {_when(p.leased_until)})"
        elif p.due_at > now:
            state = f"waiting until {_when(p.due_at)}"
        else:
            state = "queued"
        name = p.step + (" (compensation)" if p.compensation else "")
        report = progress.pop(p.position, None) if not p.compensation else None
        shown = json.dumps(report.progress, separators=(",", ":")) if report else ""
        rows.append([str(p.position), name, state, str(p.attempts), p.queue, shown])
    for report in progress.values():  # reported progress; its item is between leases
        shown = json.dumps(report.progress, separators=(",", ":"))
        rows.append([str(report.position), "-", "-", str(report.attempt), "-", shown])
    _table(rows)


def _children(run: RunInfo) -> None:
    """The child runs it started (show one with ``querator runs show RUN``)."""
    if not run.children:
        return
    typer.echo("children:")
    rows = [["POS", "RUN", "WORKFLOW", "STATUS", "ON PARENT END"]]
    for c in run.children:
        rows.append([str(c.position), c.run_id, c.workflow, c.status or "purged"])
        rows[-1].append(c.parent_close_policy)
    _table(rows)


def _compensations(run: RunInfo) -> None:
    """A saga's compensations in the order they run."""
    if not run.compensations:
        return
    typer.echo("compensations:")
    rows = [["UNDOES", "COMPENSATION", "OUTCOME", "ATTEMPTS", "FINISHED", "ERROR"]]
    for c in run.compensations:
        rows.append([f"{c.step}@{c.position}", c.name, c.outcome, str(c.attempts)])
        rows[-1] += [_when(c.finished_at), c.error or ""]
    _table(rows)


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
    with _reporting(), _store(url) as q:
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
    with _reporting(), _store(url) as q:
        get_run(q, run_id)  # an unknown run id is an error, not a silent no-op
        cancelled = RunHandle(q, run_id).cancel(reason)
    typer.echo(f"{run_id}: {'cancel requested' if cancelled else 'already ended'}")
    if not cancelled:
        raise typer.Exit(1)


@runs_app.command("send")
def runs_send(
    run_id: str,
    topic: str,
    value: Annotated[str, typer.Argument(help="The message, as JSON (quote a string: '\"hi\"').")],
    url: Url = DEFAULT_URL,
    idempotency_key: Annotated[
        str | None, typer.Option(help="Sending again with this key adds nothing.")
    ] = None,
) -> None:
    """Send a message to a run: the run's next recv(TOPIC) reads it."""
    with _reporting():
        message = json_argument(value)
        with _store(url) as q:
            send(q, run_id, topic, message, idempotency_key=idempotency_key)
    typer.echo(f"{run_id}: sent on {topic}")


@runs_app.command("retry-compensation")
def runs_retry_compensation(run_id: str, url: Url = DEFAULT_URL) -> None:
    """Run the failed compensation of a compensation_failed saga again."""
    with _reporting(), _store(url) as q:
        get_run(q, run_id)
        redriven = RunHandle(q, run_id).retry_compensation()
    typer.echo(f"{run_id}: {'compensating again' if redriven else 'not compensation_failed'}")
    if not redriven:
        raise typer.Exit(1)


@runs_app.command("resume")
def runs_resume(run_id: str, url: Url = DEFAULT_URL) -> None:
    """Run a failed or cancelled run again, same id, from its first failed step
    (the steps before it keep their results)."""
    with _reporting(), _store(url) as q:
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
    with _reporting(), _store(url) as q:
        handle = fork(q, run_id, from_step)
    typer.echo(handle.run_id)


def _replay_line(check: ReplayCheck) -> str:
    patches = "".join(
        f", patch {name}: {'new' if taken else 'old'} branch"
        for name, taken in sorted(check.patches.items())
    )
    if check.ok:
        end = "ran to its end" if check.ended else "waits for what comes next"
        return (
            f"{check.run_id}  ok  {check.workflow}: {check.replayed} stored step(s), {end}"
            + patches
        )
    return f"{check.run_id}  NonDeterminism  {check.workflow}: {check.error}{patches}"


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
    report any that the code no longer matches (exit status 1 if one does; 0
    when --running finds no running run: nothing to check)."""
    with _reporting():
        if not app_target:
            raise InvalidArgument("app", "is required: --app MODULE[:ATTR]")
        functions = load_functions(app_target)
        names = {fn.name for fn in functions if isinstance(fn, WorkflowFunction)}
        with _store(url) as q:
            wanted = list(run_ids or [])
            if running:
                listed = _running_runs(q)
                wanted += [r.run_id for r in listed if r.workflow in names]
            if not wanted and not running:
                raise InvalidArgument("run_ids", "name at least one run, or pass --running")
            checks = [check_replay(q, run_id, functions) for run_id in wanted]
    if not checks:  # --running and none runs: nothing can diverge (a deploy gate passes)
        typer.echo(
            f"nothing to check: no run of the {len(names)} workflow(s) of {app_target} is running",
            err=as_json,
        )
        return
    for check in checks:
        typer.echo(check.model_dump_json() if as_json else _replay_line(check))
    if not all(check.ok for check in checks):
        raise typer.Exit(1)


def _running_runs(q: QueueClient) -> list[RunInfo]:
    """Every running run, page by page."""
    found: list[RunInfo] = []
    after: str | None = None
    while True:
        page = list_runs(q, status="running", after=after, limit=500)
        found += page
        if len(page) < 500:
            return found
        after = page[-1].run_id
