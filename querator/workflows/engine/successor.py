"""Continue-as-new: a run that ends by starting its successor, with a fresh
history, in the transaction that ends it. Pure, no I/O.

``continue_as_new(*args)`` in a body parks it on :class:`ContinueAsNew`; the
engine reads that as the body's end (:func:`querator.workflows.engine.replay.resume`),
so every path that ends a run (a live body, a replay) ends it the same way:
the run's result record names its successor (``continued_as``) and carries
the successor's arguments, and the commit that stores it also stores the
successor's meta and start wake (:func:`successor_items`). The successor's id
is derived from the run's, so a commit repeated after a crash starts the same
one, once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from querator.queue.models import Item
from querator.workflows.attributes import AttributeValue
from querator.workflows.stored import RunMeta, RunRecord, start_items

__all__ = ["ContinueAsNew", "successor_id", "successor_items"]


@dataclass(frozen=True)
class ContinueAsNew:
    """The body asked to end and start its successor with these arguments."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    """The search attributes the run held at the call: the successor's at its start."""


def successor_id(run_id: str) -> str:
    """The run id of the successor of run ``run_id``."""
    return "run-" + hashlib.sha256(f"next:{run_id}".encode()).hexdigest()[:32]


def successor_items(run_id: str, meta: RunMeta, final: RunRecord) -> dict[str, list[Item]]:
    """What ending run ``run_id`` (``meta``) with ``final`` starts: its successor's
    meta and start wake when ``final`` continues as new, else nothing. The
    successor keeps the workflow, queue, deadline, trace and parent (it reports
    to the parent in the run's place), links back (``continued_from``), and
    starts with the search attributes the run held when it continued (a record
    written before they were kept: those of the run's start)."""
    if final.continued_as is None or final.continued_args is None:
        return {}
    attributes = final.continued_attributes
    successor = meta.model_copy(
        update={
            "args": final.continued_args,
            "started_at": final.finished_at,
            "continued_from": run_id,
            "nonce": None,
            "attributes": meta.attributes if attributes is None else attributes,
        }
    )
    return start_items(final.continued_as, successor)
