"""Continuation: what a worker may take on itself when it advances a run.

Without it, a step ends by producing a wake task, another lease replays the run
and dispatches the next step item, and a third lease picks that up: three round
trips per step. With it, the worker that commits a step replays the run at once
(eager continuation, :func:`querator.workflows.engine.replay.advance_after_step`) and,
when the next step is one it runs itself, produces that step item already
leased to itself (``transact(produce_leased=...)``) and runs it straight away.

A claimed item is an ordinary leased item: if the worker dies, its lease
expires and any worker runs it, so the hand-off changes no guarantee.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from querator.queue.models import Item
from querator.workflows.functions import StepFunction, WorkflowFunction
from querator.workflows.layout import STEP_KIND, StepPayload


@dataclass(frozen=True)
class Continuation:
    """What a worker serves, so its replays know what they may take on themselves."""

    workflows: Mapping[str, WorkflowFunction[..., Any]]
    steps: Mapping[str, StepFunction[..., Any]]
    queues: frozenset[str]
    """The queues the worker leases from."""
    client_id: str
    active: Callable[[], bool]
    """False once the worker is stopping: it then takes nothing new on itself."""


@dataclass(frozen=True)
class Claim:
    """The step item a commit produces leased to this worker, to run next."""

    queue: str
    item: Item
    payload: StepPayload


def split_claim(
    cont: Continuation | None,
    produce: dict[str, list[Item]],
    payloads: Mapping[str, StepPayload] | None = None,
) -> tuple[dict[str, list[Item]], Claim | None]:
    """Take the step item to run next out of ``produce``, when there is exactly one
    (a fan-out goes to the queue: other workers run its members in parallel),
    it is due now, and this worker serves its queue and knows its step.
    ``payloads``: the step items' payloads by dedup key, when known (else decoded)."""
    if cont is None or not cont.active():
        return produce, None
    steps = [(queue, item) for queue, items in produce.items() for item in items]
    steps = [(queue, item) for queue, item in steps if item.kind == STEP_KIND]
    if len(steps) != 1:
        return produce, None
    queue, item = steps[0]
    if queue not in cont.queues or item.enqueue_at is not None:
        return produce, None
    known = payloads.get(item.dedup_key or "") if payloads is not None else None
    payload = known if known is not None else StepPayload.model_validate_json(item.payload)
    if payload.step not in cont.steps:
        return produce, None
    rest = {name: [i for i in items if i is not item] for name, items in produce.items()}
    return {name: items for name, items in rest.items() if items}, Claim(queue, item, payload)
