"""Changing a workflow's code under running runs: ``patched`` and ``deprecate_patch``.

```python
from querator.workflows import patched

if patched("new-pricing"):
    price = price_v2(order)   # runs that reach this point with the new code
else:
    price = price_v1(order)   # runs whose history was recorded before it
```

The deploy recipe (patch, wait, deprecate) is in docs/workflows.md.
"""

from __future__ import annotations

from querator.workflows.engine.context import CURRENT
from querator.workflows.engine.patching import check_patch_name

__all__ = ["deprecate_patch", "patched"]


def patched(name: str) -> bool:
    """Whether this run takes the new branch of the code change ``name``.

    True in a run that reaches the call with the code holding it (a marker is
    stored in the run's history there, so its replays answer True as well);
    False in a run whose history was recorded by code without it (it went
    past this point before the deploy, or is parked on a call the old code
    made here): that run replays the old branch and never fails with
    :class:`NonDeterminism` for it. The first answer holds for the rest of the
    run (a patch in a loop is decided once). Outside a workflow body: True.
    ``name``: a non-empty string of at most 200 characters
    (:class:`~querator.errors.InvalidArgument` otherwise).
    """
    name = check_patch_name(name)
    ctx = CURRENT.get()
    if ctx is None:
        return True
    return ctx.patched(name)


def deprecate_patch(name: str) -> None:
    """Mark that the old branch of patch ``name`` is gone: replaces
    ``if patched(name): new else: old`` by ``deprecate_patch(name); new`` once
    no run that took the old branch is running. Runs that stored the marker
    step over it; new runs store none. Removing the call later is safe too (any
    call steps over a marker it meets). Outside a workflow body: nothing.
    """
    name = check_patch_name(name)
    ctx = CURRENT.get()
    if ctx is not None:
        ctx.deprecate_patch(name)
