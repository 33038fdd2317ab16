"""Patch markers: how ``patched(name)`` decides a branch from the run's history. Pure.

``patched(name)`` at position *p* of a body:

- the record at *p* is the marker of ``name``: the run took the new branch
  before (a replay): True, the position is consumed;
- *p* has no record and no later position has one: the run reaches the patch
  point for the first time, with this code: True, and a marker is stored at
  *p* with the body's next move;
- else (another call's record at *p*, or records past it: a history recorded
  by code without the patch): False, and the position is given back, so the
  old branch's calls find their records where they were stored.

The first answer for a name holds for the rest of the run (as Temporal's
``patched``): a patch inside a loop stores one marker. Any other call skips a
marker at its position, so a marker left by a patch whose call was removed
(after ``deprecate_patch``) changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from querator.errors import InvalidArgument
from querator.workflows.keys import PATCH_STEP
from querator.workflows.stored import StepRecord

__all__ = ["MAX_PATCH_NAME", "check_patch_name", "first_reached", "marker", "marker_name"]

MAX_PATCH_NAME = 200
"""Longest patch name (characters)."""


def check_patch_name(name: object) -> str:
    """``name`` if it is a non-empty string of at most :data:`MAX_PATCH_NAME` characters."""
    if not isinstance(name, str) or not name or len(name) > MAX_PATCH_NAME:
        raise InvalidArgument(
            "name", f"a patch name is a non-empty string of at most {MAX_PATCH_NAME} characters"
        )
    return name


def marker(name: str) -> StepRecord:
    """The marker stored where ``patched(name)`` first returned True."""
    return StepRecord(step=PATCH_STEP, ok=True, result=json.dumps(name), attempts=1)


def marker_name(record: StepRecord | None) -> str | None:
    """The patch a marker record names (None: not a marker)."""
    if record is None or record.step != PATCH_STEP or record.result is None:
        return None
    name = json.loads(record.result)
    return name if isinstance(name, str) else None


def first_reached(records: Mapping[int, StepRecord], position: int) -> bool:
    """Whether the body reaches ``position`` for the first time: no record at
    it or past it (gathered calls end out of order: a later record means a call
    at ``position`` was made and has not ended)."""
    return all(p < position for p in records)
