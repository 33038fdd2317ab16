"""``querator start``: start a workflow run from the shell, and wait for it if asked."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from querator.cli.app import AsJson, Url, _reporting, _store, app
from querator.cli.loading import load_functions
from querator.errors import InvalidArgument
from querator.queue.options import DEFAULT_URL
from querator.workflows.attributes import parse_condition
from querator.workflows.functions import WorkflowFunction
from querator.workflows.inspection import get_run
from querator.workflows.runs import start

WorkflowApp = Annotated[
    str,
    typer.Option(
        "--app",
        envvar="QUERATOR_APP",
        metavar="MODULE[:ATTR]",
        help="Where the workflow is defined (its arguments are checked against it).",
    ),
]
"""``--app``: the module that defines the workflow a command names."""


@app.command("start")
def start_run(
    workflow: Annotated[str, typer.Argument(help="The workflow's persisted name.")],
    app_target: WorkflowApp,
    args: Annotated[
        str,
        typer.Option(help="The arguments as JSON: an array (positional) or an object (by name)."),
    ] = "[]",
    key: Annotated[
        str | None, typer.Option(help="Idempotency key: the same key gives the same run.")
    ] = None,
    wait: Annotated[bool, typer.Option(help="Wait for the run to end; print its result.")] = False,
    timeout: Annotated[
        float | None, typer.Option(help="With --wait: give up after this many seconds.")
    ] = None,
    attr: Annotated[
        list[str] | None,
        typer.Option(
            help="A search attribute of the run: name=value (repeatable; as runs list --where)."
        ),
    ] = None,
    url: Url = DEFAULT_URL,
    as_json: AsJson = False,
) -> None:
    """Start a run of WORKFLOW with --args; print its id (and its result with --wait).

    Exit status 1 when the run failed or was cancelled (the error is printed),
    or when --timeout passed first; 2 for a bad argument.
    """
    with _reporting():
        fn = _workflow(workflow, app_target)
        positional, named = _arguments(args)
        attributes = dict(parse_condition(text, "--attr") for text in attr or ())
        with _store(url) as q:
            run = start(
                q, fn, *positional, idempotency_key=key, attributes=attributes or None, **named
            )
            if not wait:
                _print(as_json, {"run_id": run.run_id}, run.run_id)
                return
            run.result(timeout=timeout)  # WorkflowFailed & co: reported, exit 1
            info = get_run(q, run.run_id)
    result = json.loads(info.result) if info.result is not None else None
    report = {"run_id": run.run_id, "status": info.status, "result": result}
    _print(as_json, report, f"{run.run_id} {info.status}\n{json.dumps(result)}")


def _workflow(name: str, target: str) -> WorkflowFunction[..., Any]:
    workflows = [f for f in load_functions(target) if isinstance(f, WorkflowFunction)]
    for fn in workflows:
        if fn.name == name:
            return fn
    known = ", ".join(sorted(f.name for f in workflows)) or "none"
    raise InvalidArgument("workflow", f"{name[:80]!r} is not a workflow of {target} ({known})")


def _arguments(text: str) -> tuple[list[Any], dict[str, Any]]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgument("--args", f"is not JSON: {exc}") from None
    if isinstance(value, list):
        return value, {}
    if isinstance(value, dict):
        return [], value
    raise InvalidArgument("--args", "must be a JSON array (positional) or object (by name)")


def _print(as_json: bool, report: dict[str, Any], text: str) -> None:
    typer.echo(json.dumps(report) if as_json else text)
