"""Loading the ``@step``/``@workflow``/``@task`` functions a command names (``MODULE[:ATTR]``)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from querator.errors import InvalidArgument
from querator.tasks.functions import TaskFunction
from querator.workflows.functions import DurableFunction, StepFunction, WorkflowFunction

__all__ = ["load_functions", "load_served"]


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
    functions = [f for f in load_served(target) if not isinstance(f, TaskFunction)]
    if not functions:
        raise InvalidArgument("module", f"no @step or @workflow function in {target!r}")
    return functions


def load_served(target: str) -> list[DurableFunction | TaskFunction[..., Any]]:
    """The ``@step``/``@workflow``/``@task`` functions named by ``MODULE[:ATTR]``
    (what a worker serves; see :func:`load_functions`)."""
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
        if isinstance(found, _SERVED):
            found = [found]
        elif not isinstance(found, list | tuple | set | frozenset):
            raise InvalidArgument("module", f"{attr!r} is neither a function nor a list of them")
    functions: dict[int, DurableFunction | TaskFunction[..., Any]] = {}
    for obj in found:
        if isinstance(obj, _SERVED):
            functions.setdefault(id(obj), obj)
        elif attr:
            raise InvalidArgument(
                "module", f"{obj!r} in {attr!r} is not a @step, @workflow or @task"
            )
    if not functions:
        raise InvalidArgument("module", f"no @step, @workflow or @task function in {target!r}")
    return list(functions.values())


_SERVED = (StepFunction, WorkflowFunction, TaskFunction)
