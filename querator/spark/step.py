"""``@spark_step``: a workflow step whose function runs Spark jobs in the worker's session."""

from __future__ import annotations

import functools
import inspect
import logging
import re
import time
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar, cast, overload

from typing_extensions import Unpack

from querator.errors import InvalidArgument
from querator.queue.options import check_options
from querator.spark.session import SparkResource, default_resource, resource_from
from querator.spark.stage import SparkStage
from querator.spark.storage import (
    CommitMarker,
    Storage,
    commit,
    read_marker,
    staging_path,
    staging_root,
)
from querator.spark.submission import SubmissionMarker, read_submission, submission_tag
from querator.spark.watch import StageWatch, stage_progress
from querator.workflows.functions import StepFunction, StepOptions
from querator.workflows.step_context import StepContext, current_step

__all__ = ["SparkStage", "SparkStepFunction", "spark_step", "stage_progress"]

log = logging.getLogger("querator.spark")

P = ParamSpec("P")
R = TypeVar("R")

PROGRESS_INTERVAL = 5.0
"""Seconds between two progress lines of a running stage (when it changed)."""


def _recorded_submission(
    storage: Storage, final: str, stage: SparkStage
) -> SubmissionMarker | None:
    """The submission an earlier attempt of this very step call recorded, if any."""
    found = read_submission(storage, final)
    if found is not None and found.same_call(stage.step, stage.run_id, stage.position):
        return found
    return None


def _group_name(step: str, ctx: StepContext | None) -> str:
    if ctx is None:
        raw = f"querator-{step}-inline-{time.monotonic_ns()}"
    else:
        raw = f"querator-{ctx.run_id}-{ctx.position}-{ctx.attempt}"
    return re.sub(r"[^A-Za-z0-9_.-]", "-", raw)


class SparkStepOptions(StepOptions, total=False):
    """The options of ``@spark_step``: those of ``@step``, and one more."""

    progress_interval: float
    """Seconds between progress log lines (default :data:`PROGRESS_INTERVAL`)."""


class SparkStepFunction(StepFunction[..., R]):
    """A step made by ``@spark_step``: called in a workflow as ``stage(*args, output=path)``."""

    def __init__(self, fn: Callable[..., R], **options: Unpack[SparkStepOptions]) -> None:
        check_options("@spark_step", options, SparkStepOptions)
        self.stage_fn = fn
        self.progress_interval = options.get("progress_interval", PROGRESS_INTERVAL)
        self.spark_timeout = options.get("timeout")
        # The item must not be failed by the engine's late-return check: the watch
        # cancels the Spark jobs at ``timeout`` and the attempt raises StepTimeout.
        own = ("progress_interval", "timeout")
        step_options = cast(StepOptions, {k: v for k, v in options.items() if k not in own})
        super().__init__(_entry(self, fn), **step_options)

    def run_stage(self, args: tuple[Any, ...], kwargs: dict[str, Any], output: str | None) -> Any:
        """One attempt: reuse a committed output of this very call, or run and commit."""
        ctx = current_step()
        resource = resource_from(ctx.resources) if ctx is not None else default_resource()
        run_id = ctx.run_id if ctx is not None else None
        position = ctx.position if ctx is not None else None
        attempt = ctx.attempt if ctx is not None else 1
        stage = SparkStage(
            resource=resource,
            output=None,
            final=output,
            step=self.name,
            run_id=run_id,
            position=position,
            attempt=attempt,
            job_group=_group_name(self.name, ctx),
            submission_tag=submission_tag(self.name, run_id, position),
        )
        storage: Storage | None = None
        if output is not None:
            storage = stage.storage(output)
            done = read_marker(storage, output)
            if done is not None and done.same_call(self.name, run_id, position):
                log.info(
                    "run %s step %s@%s: %s already committed by attempt %d; not re-running",
                    run_id,
                    self.name,
                    position,
                    output,
                    done.attempt,
                )
                return self.codec.decode_result(done.result) if done.result else None
            stage.recorded = _recorded_submission(storage, output, stage)
            if stage.recorded is not None:  # keep the staging the external job writes to
                stage.output = stage.recorded.output
            else:
                storage.delete(staging_root(output))
                stage.output = staging_path(output, attempt)
        value = self._watched(stage, resource, ctx, args, kwargs)
        if output is not None and storage is not None and stage.output is not None:
            marker = CommitMarker(
                step=self.name,
                run_id=run_id,
                position=position,
                attempt=attempt,
                result=self.codec.encode_result(value),
            )
            commit(storage, stage.output, output, marker)
            log.info("run %s step %s@%s: committed %s", run_id, self.name, position, output)
        return value

    def _watched(
        self,
        stage: SparkStage,
        resource: SparkResource,
        ctx: StepContext | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        watch = StageWatch(stage, resource, ctx, self.spark_timeout, self.progress_interval)
        if ctx is not None and not ctx.compensation:
            watch.deadline = ctx.run_deadline()
            early = watch.stop_reason()
            if early is not None:
                raise early
        if resource.started:
            stage.spark  # noqa: B018 -- a warm worker: bind this thread's jobs to the group now
        watch.start()
        try:
            value = self.stage_fn(stage, *args, **kwargs)
        except Exception as exc:
            if watch.reason is not None and watch.reason is not exc:
                raise watch.reason from exc
            raise
        finally:
            watch.done.set()
            watch.join()
            stage.unbind()
        if watch.reason is not None:
            raise watch.reason
        if stage.bound and not resource.is_connect:
            stage.progress = stage_progress(stage.spark, stage.job_group)
        return value

    def __repr__(self) -> str:
        return f"<spark step {self.name!r}>"


def _entry(step: SparkStepFunction[Any], fn: Callable[..., Any]) -> Callable[..., Any]:
    """The function the engine calls: ``fn`` without its stage parameter, plus ``output=``."""
    signature = inspect.signature(fn)
    params = list(signature.parameters.values())
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if not params or params[0].kind not in positional:
        raise InvalidArgument("spark_step", f"{fn!r} must take the SparkStage first")
    first, rest = params[0], params[1:]
    if any(p.name == "output" for p in rest):
        raise InvalidArgument("spark_step", f"{fn!r}: 'output' is reserved for the output location")
    output = inspect.Parameter(
        "output", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=str | None
    )
    at = next((i for i, p in enumerate(rest) if p.kind is inspect.Parameter.VAR_KEYWORD), len(rest))
    rest.insert(at, output)

    def entry(*args: Any, **kwargs: Any) -> Any:
        out = kwargs.pop("output", None)
        return step.run_stage(args, kwargs, out)

    functools.update_wrapper(entry, fn)
    entry.__signature__ = signature.replace(parameters=rest)  # type: ignore[attr-defined]
    annotations = {k: v for k, v in fn.__annotations__.items() if k != first.name}
    annotations["output"] = str | None
    entry.__annotations__ = annotations
    return entry


@overload
def spark_step(fn: Callable[Concatenate[SparkStage, P], R], /) -> SparkStepFunction[R]: ...


@overload
def spark_step(
    **options: Unpack[SparkStepOptions],
) -> Callable[[Callable[Concatenate[SparkStage, P], R]], SparkStepFunction[R]]: ...


def spark_step(
    fn: Callable[Concatenate[SparkStage, P], R] | None = None,
    /,
    **options: Unpack[SparkStepOptions],
) -> (
    SparkStepFunction[R] | Callable[[Callable[Concatenate[SparkStage, P], R]], SparkStepFunction[R]]
):
    """Make ``fn(stage: SparkStage, *args)`` a Spark stage: a ``@step`` whose function
    gets the worker's SparkSession (``stage.spark``) and writes its output to
    ``stage.output``; call it in a workflow as ``fn(*args, output=path)``.

    When the function returns, ``stage.output`` is committed to ``path`` (see
    :mod:`querator.spark.storage`) before the step's result is recorded. A
    re-run of the same call (a crash between the commit and the record) finds
    the commit marker and returns the stored result without running Spark
    again. Options are those of ``@step``; ``timeout`` cancels the attempt's
    Spark jobs (it fails with ``StepTimeout``), as does the run's cancellation
    or deadline (``WorkflowCancelled``). ``progress_interval``: seconds between
    progress log lines. A stage whose job runs on a cluster in cluster mode
    submits it with :meth:`SparkStage.submit_once` (once per step call: a retry
    re-attaches to the recorded job).
    """

    check_options("@spark_step", options, SparkStepOptions)

    def decorate(f: Callable[Concatenate[SparkStage, P], R]) -> SparkStepFunction[R]:
        return SparkStepFunction(f, **options)

    return decorate(fn) if fn is not None else decorate
