"""Child runs as a parent's body asks for them: the request to start one (a
call, or a member of a gather), and what committing it produces. Pure, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from querator.queue.models import Item
from querator.workflows.attributes import AttributeValue
from querator.workflows.codec import Codec
from querator.workflows.keys import RESULTS_QUEUE, child_key, child_run_id
from querator.workflows.stored import (
    ChildLink,
    ParentClosePolicy,
    ParentLink,
    RunMeta,
    StepPayload,
    record_item,
    start_items,
)

__all__ = [
    "Child",
    "ChildSpec",
    "Member",
    "child_items",
    "child_request",
    "member_position",
]


@dataclass(frozen=True)
class ChildSpec:
    """How a workflow is run as a child: its name, queue, timeout, codec, what
    its parent's end does to it (:data:`ParentClosePolicy`), and the search
    attributes it starts with (none of its parent's unless given here)."""

    name: str
    queue: str | None
    timeout: float | None
    codec: Codec
    policy: ParentClosePolicy = "cancel"
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Child:
    """Start child run ``run_id`` (``meta``) and resume with its outcome at
    ``position``; ``policy``: what the parent's end does to it if it still runs."""

    position: int
    run_id: str
    meta: RunMeta
    policy: ParentClosePolicy = "cancel"


Member = tuple[str, StepPayload] | Child
"""A gather's member: (queue, payload) of a step item, or a child run."""


def member_position(member: Member) -> int:
    """The position whose record a gather's member ends with."""
    return member.position if isinstance(member, Child) else member[1].position


def child_request(
    spec: ChildSpec,
    parent: ParentLink,
    args: str,
    now: datetime,
    trace: Mapping[str, str],
    priority: int = 0,
) -> Child:
    """The request to start ``spec`` with encoded ``args`` as the child of
    ``parent`` (the parent's run, position, queue and workflow), at ``now``; the
    child shares the parent's ``trace`` and its ``priority``."""
    timeout = spec.timeout
    meta = RunMeta(
        workflow=spec.name,
        args=args,
        queue=spec.queue or parent.queue,
        started_at=now,
        deadline=now + timedelta(seconds=timeout) if timeout is not None else None,
        parent=parent,
        trace=dict(trace),
        priority=priority,
        attributes=dict(spec.attributes),
    )
    return Child(parent.position, child_run_id(parent.run_id, parent.position), meta, spec.policy)


def child_items(parent: str, child: Child) -> dict[str, list[Item]]:
    """What the commit of run ``parent`` that starts ``child`` produces: the
    child's start items and the parent's link to it (``{parent}/child/{position}``)."""
    meta = child.meta
    produce = start_items(child.run_id, meta)
    link = ChildLink(
        run_id=child.run_id,
        workflow=meta.workflow,
        queue=meta.queue,
        position=child.position,
        policy=child.policy,
    )
    produce[RESULTS_QUEUE].append(record_item(child_key(parent, child.position), link, parent))
    return produce
