"""``@spark_step``: a workflow step whose function runs Spark jobs in the worker's session."""

from __future__ import annotations

import functools
import inspect
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, overload

import anyio.from_thread

from querator.errors import InvalidArgument
from querator.spark.session import SparkResource, default_resource, resource_from
from querator.spark.storage import (
    CommitMarker,
    Storage,
    UncommittedInput,
    commit,
    is_committed,
    read_marker,
    staging_path,
    staging_root,
    storage_for,
)
from querator.workflows.errors import StepTimeout, WorkflowCancelled
from querator.workflows.execute import CURRENT_STEP, StepContext
from querator.workflows.functions import StepFunction
from querator.workflows.layout import (
    RESULTS_QUEUE,
    RunMeta,
    aborted_key,
    cancel_key,
    compensating_key,
    meta_key,
)
from querator.workflows.retry import RetryPolicy

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SparkStage", "SparkStepFunction", "spark_step"]

log = logging.getLogger("querator.spark")

P = ParamSpec("P")
R = TypeVar("R")

WATCH_INTERVAL = 0.25
"""Seconds between two checks for cancellation, deadline and timeout."""
PROGRESS_INTERVAL = 5.0
"""Seconds between two progress lines of a running stage (when it changed)."""


@dataclass
class SparkStage:
    """What a Spark stage function receives first.

    ``spark`` is the worker's session. ``output`` is where this attempt writes
    (a staging directory, committed to ``final`` when the function returns);
    None when the step was called without ``output=``. Read inputs through
    :meth:`input` so a stage never reads an uncommitted location.
    """

    spark: SparkSession
    output: str | None
    final: str | None
    step: str
    run_id: str | None = None
    position: int | None = None
    attempt: int = 1
    job_group: str = ""
    progress: list[dict[str, Any]] = field(default_factory=list)
    """The last progress snapshot: one dict per Spark stage of this attempt's jobs."""

    def input(self, path: str) -> str:
        """``path`` if it holds a committed output; :class:`UncommittedInput` if not."""
        if not is_committed(path, storage_for(path, self.spark)):
            raise UncommittedInput(f"step {self.step!r}: {path!r} holds no committed output")
        return path


class _Watch(threading.Thread):
    """Watches a running stage: cancels its Spark jobs when its run is cancelled,
    aborted (saga) or past its deadline, or the attempt outlives ``timeout``;
    logs progress."""

    def __init__(
        self,
        stage: SparkStage,
        resource: SparkResource,
        ctx: StepContext | None,
        timeout: float | None,
        progress_interval: float,
    ) -> None:
        super().__init__(name=f"querator-spark-watch-{stage.job_group}", daemon=True)
        self.stage = stage
        self.resource = resource
        self.ctx = ctx
        self.timeout = timeout
        self.progress_interval = progress_interval
        self.began = time.monotonic()
        self.done = threading.Event()
        self.reason: BaseException | None = None
        self.cancelled_at: float | None = None
        self.deadline: datetime | None = None
        self._last_progress = 0.0
        self._last_snapshot: list[dict[str, Any]] = []

    def run(self) -> None:
        while not self.done.wait(WATCH_INTERVAL):
            try:
                if self.reason is None:
                    self.reason = self._stop_reason()
                if self.reason is not None:
                    self._cancel()  # again each round: jobs started since are cancelled too
                self._progress()
            except Exception as exc:  # the event loop may be gone at shutdown
                log.debug("spark watch of %s: %r", self.stage.job_group, exc)

    def _stop_reason(self) -> BaseException | None:
        name = self.stage.step
        if self.timeout is not None and time.monotonic() - self.began > self.timeout:
            return StepTimeout(f"step {name!r} was cancelled after {self.timeout}s")
        ctx = self.ctx
        if ctx is None or ctx.compensation:
            return None
        if self.deadline is not None and datetime.now(UTC) >= self.deadline:
            return WorkflowCancelled(ctx.run_id, f"deadline passed; step {name!r} cancelled")
        keys = [cancel_key(ctx.run_id), aborted_key(ctx.run_id), compensating_key(ctx.run_id)]
        found = anyio.from_thread.run(ctx.aq.lookup, RESULTS_QUEUE, keys, token=ctx.token)
        if any(key in found for key in keys):
            return WorkflowCancelled(ctx.run_id, f"step {name!r} cancelled")
        return None

    def _cancel(self) -> None:
        if self.cancelled_at is None:
            self.cancelled_at = time.monotonic()
            log.info("spark: cancelling %s: %s", self.stage.job_group, self.reason)
        spark = self.stage.spark
        if self.resource.is_connect:
            spark.interruptTag(self.stage.job_group)
        else:
            spark.sparkContext.cancelJobGroup(self.stage.job_group)

    def _progress(self) -> None:
        if self.resource.is_connect:
            return  # Spark Connect has no status tracker on the client
        now = time.monotonic()
        if now - self._last_progress < self.progress_interval:
            return
        self._last_progress = now
        snapshot = stage_progress(self.stage.spark, self.stage.job_group)
        self.stage.progress = snapshot
        if snapshot and snapshot != self._last_snapshot:
            self._last_snapshot = snapshot
            for s in snapshot:
                log.info(
                    "run %s step %s: spark job %d stage %d %s: %d/%d tasks (%d active, %d failed)",
                    self.stage.run_id,
                    self.stage.step,
                    s["job"],
                    s["stage"],
                    s["name"],
                    s["completed"],
                    s["tasks"],
                    s["active"],
                    s["failed"],
                )


def stage_progress(spark: SparkSession, group: str) -> list[dict[str, Any]]:
    """Progress of the Spark stages of the jobs of ``group`` (classic sessions)."""
    tracker = spark.sparkContext.statusTracker()
    out: list[dict[str, Any]] = []
    for job_id in sorted(tracker.getJobIdsForGroup(group)):
        job = tracker.getJobInfo(job_id)
        if job is None:
            continue
        for stage_id in sorted(job.stageIds):
            info = tracker.getStageInfo(stage_id)
            if info is None:
                continue
            out.append(
                {
                    "job": job_id,
                    "status": str(job.status),
                    "stage": stage_id,
                    "name": info.name,
                    "tasks": info.numTasks,
                    "completed": info.numCompletedTasks,
                    "active": info.numActiveTasks,
                    "failed": info.numFailedTasks,
                }
            )
    return out


def _group_name(step: str, ctx: StepContext | None) -> str:
    if ctx is None:
        raw = f"querator-{step}-inline-{time.monotonic_ns()}"
    else:
        raw = f"querator-{ctx.run_id}-{ctx.position}-{ctx.attempt}"
    return re.sub(r"[^A-Za-z0-9_.-]", "-", raw)


def _deadline(ctx: StepContext) -> datetime | None:
    found = anyio.from_thread.run(ctx.aq.lookup, RESULTS_QUEUE, [meta_key(ctx.run_id)])
    item = found.get(meta_key(ctx.run_id))
    return RunMeta.model_validate_json(item.payload).deadline if item is not None else None


class SparkStepFunction(StepFunction[..., R]):
    """A step made by ``@spark_step``: called in a workflow as ``stage(*args, output=path)``."""

    def __init__(
        self,
        fn: Callable[..., R],
        *,
        name: str | None,
        retry: RetryPolicy | None,
        queue: str | None,
        lease_timeout: float | None,
        timeout: float | None,
        compensate_on_failure: bool,
        progress_interval: float,
    ) -> None:
        self.stage_fn = fn
        self.progress_interval = progress_interval
        self.spark_timeout = timeout
        # The item must not be failed by the engine's late-return check: the watch
        # cancels the Spark jobs at ``timeout`` and the attempt raises StepTimeout.
        super().__init__(
            _entry(self, fn),
            name=name,
            retry=retry,
            queue=queue,
            lease_timeout=lease_timeout,
            timeout=None,
            compensate_on_failure=compensate_on_failure,
        )

    def run_stage(self, args: tuple[Any, ...], kwargs: dict[str, Any], output: str | None) -> Any:
        """One attempt: reuse a committed output of this very call, or run and commit."""
        ctx = CURRENT_STEP.get()
        resource = resource_from(ctx.resources) if ctx is not None else default_resource()
        spark = resource.session()
        run_id = ctx.run_id if ctx is not None else None
        position = ctx.position if ctx is not None else None
        attempt = ctx.attempt if ctx is not None else 1
        storage: Storage | None = None
        if output is not None:
            storage = storage_for(output, spark)
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
            storage.delete(staging_root(output))
        stage = SparkStage(
            spark=spark,
            output=staging_path(output, attempt) if output is not None else None,
            final=output,
            step=self.name,
            run_id=run_id,
            position=position,
            attempt=attempt,
            job_group=_group_name(self.name, ctx),
        )
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
        watch = _Watch(stage, resource, ctx, self.spark_timeout, self.progress_interval)
        if ctx is not None and not ctx.compensation:
            watch.deadline = _deadline(ctx)
            early = watch._stop_reason()
            if early is not None:
                raise early
        spark = stage.spark
        if resource.is_connect:
            spark.addTag(stage.job_group)
        else:
            spark.sparkContext.setJobGroup(stage.job_group, self.name, interruptOnCancel=True)
        watch.start()
        try:
            value = self.stage_fn(stage, *args, **kwargs)
        except Exception as exc:
            if watch.reason is not None:
                raise watch.reason from exc
            raise
        finally:
            watch.done.set()
            watch.join()
            if resource.is_connect:
                spark.removeTag(stage.job_group)
            else:
                spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
                spark.sparkContext.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
        if watch.reason is not None:
            raise watch.reason
        stage.progress = [] if resource.is_connect else stage_progress(spark, stage.job_group)
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
    *,
    name: str | None = None,
    retry: RetryPolicy | None = None,
    queue: str | None = None,
    lease_timeout: float | None = None,
    timeout: float | None = None,
    compensate_on_failure: bool = False,
    progress_interval: float = PROGRESS_INTERVAL,
) -> Callable[[Callable[Concatenate[SparkStage, P], R]], SparkStepFunction[R]]: ...


def spark_step(
    fn: Callable[Concatenate[SparkStage, P], R] | None = None,
    /,
    *,
    name: str | None = None,
    retry: RetryPolicy | None = None,
    queue: str | None = None,
    lease_timeout: float | None = None,
    timeout: float | None = None,
    compensate_on_failure: bool = False,
    progress_interval: float = PROGRESS_INTERVAL,
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
    progress log lines.
    """

    def decorate(f: Callable[Concatenate[SparkStage, P], R]) -> SparkStepFunction[R]:
        return SparkStepFunction(
            f,
            name=name,
            retry=retry,
            queue=queue,
            lease_timeout=lease_timeout,
            timeout=timeout,
            compensate_on_failure=compensate_on_failure,
            progress_interval=progress_interval,
        )

    return decorate(fn) if fn is not None else decorate
