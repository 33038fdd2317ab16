"""Checking new workflow code against stored histories, before deploying it.

A live body hides a change of its workflow's code until its next miss (a
replay): ``check_replay`` replays a stored run with the code of *this*
process, dispatching nothing, and reports where the code now calls another
step than the history holds (what would stop the run with
:class:`NonDeterminism`). ``querator runs replay RUN_ID... MODULE`` does the
same from the command line.

```python
from querator.workflows import check_replay
report = check_replay(q, run_id, [checkout])
assert report.ok, report.error
```
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from querator.errors import InvalidArgument, QueueNotFound
from querator.model_bases import View
from querator.queue.client import QueueClient
from querator.queue.service import AsyncQueueClient
from querator.workflows.engine.fiber import Finished
from querator.workflows.engine.history import load_history
from querator.workflows.engine.replay import new_live, resume
from querator.workflows.errors import RunNotFound
from querator.workflows.functions import DurableFunction, WorkflowFunction

__all__ = ["ReplayCheck", "check_replay", "check_replay_async"]


class ReplayCheck(View):
    """What replaying a stored run with the current code found."""

    run_id: str
    workflow: str
    """The run's workflow (persisted name)."""
    ok: bool
    """True when the code makes the calls the history holds, in order."""
    replayed: int
    """Stored step records the replay went through (calls that returned them)."""
    ended: bool
    """True when the body ran to its end on the stored history alone."""
    position: int | None = None
    """Where the code diverged (None when ``ok``)."""
    stored: str | None = None
    """The step the history holds at ``position``."""
    called: str | None = None
    """The step the code calls there now."""
    error: str | None = None
    """The :class:`NonDeterminism` message (None when ``ok``)."""
    patches: dict[str, bool] = {}
    """The ``patched`` calls the replay met: True where the run takes the new
    branch, False where its history holds the old one."""


async def check_replay_async(
    aq: AsyncQueueClient, run_id: str, functions: Iterable[DurableFunction]
) -> ReplayCheck:
    """Replay ``run_id`` with ``functions`` (the run's workflow among them); see
    :func:`check_replay`."""
    workflows = {fn.name: fn for fn in functions if isinstance(fn, WorkflowFunction)}
    try:
        history = await load_history(aq, run_id)
    except QueueNotFound:
        raise RunNotFound(run_id) from None
    meta = history.meta
    if meta is None:
        raise RunNotFound(run_id)
    wf: WorkflowFunction[..., Any] | None = workflows.get(meta.workflow)
    if wf is None:
        raise InvalidArgument(
            "functions", f"run {run_id} is a {meta.workflow!r} run: pass that workflow"
        )
    live = new_live(run_id, wf, history, aq.clock)
    try:
        message = await resume(aq, live)
    finally:
        await live.close()
    ctx = live.ctx
    replayed = sum(1 for position in range(ctx.position) if position in history.records)
    fatal = ctx.fatal
    if fatal is None:
        return ReplayCheck(
            run_id=run_id,
            workflow=wf.name,
            ok=True,
            replayed=replayed,
            ended=isinstance(message, Finished),
            patches=dict(ctx.patches),
        )
    return ReplayCheck(
        run_id=run_id,
        workflow=wf.name,
        ok=False,
        replayed=replayed,
        ended=False,
        position=fatal.position,
        stored=fatal.stored,
        called=fatal.called,
        error=str(fatal),
        patches=dict(ctx.patches),
    )


def check_replay(q: QueueClient, run_id: str, functions: Iterable[DurableFunction]) -> ReplayCheck:
    """Replay the stored run ``run_id`` with the code of ``functions`` (the run's
    workflow among them), without dispatching anything, and report whether the
    code still makes the calls its history holds.

    Run it over the runs in flight (``list_runs(q, status="running")``) in a
    test or a deploy step before rolling out changed workflow code: a run it
    reports would stop with :class:`NonDeterminism` at its next replay.
    Raises :class:`~querator.errors.InvalidArgument` for an unknown run or
    when its workflow is not among ``functions``.
    """
    return q.call(check_replay_async, q.aio, run_id, list(functions))
