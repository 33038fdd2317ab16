"""The watch of a running stage attempt: cancellation, deadline, timeout, progress."""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from querator.spark.session import SparkResource
from querator.spark.stage import SparkStage
from querator.workflows.errors import StepTimeout
from querator.workflows.progress import report_progress
from querator.workflows.step_context import StepContext

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["StageWatch", "stage_progress"]

log = logging.getLogger("querator.spark")

WATCH_INTERVAL = 0.25
"""Seconds between two checks for cancellation, deadline and timeout."""


class StageWatch(threading.Thread):
    """Watches a running stage: cancels its Spark jobs (and its external job, see
    :meth:`SparkStage.submit_once`) when its run is cancelled, aborted (saga) or
    past its deadline, or the attempt outlives ``timeout``; logs progress."""

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
                    self.reason = self.stop_reason()
                if self.reason is not None:
                    self._cancel()  # again each round: jobs started since are cancelled too
                self._progress()
            except Exception as exc:  # the event loop may be gone at shutdown
                log.debug("spark watch of %s: %r", self.stage.job_group, exc)

    def stop_reason(self) -> BaseException | None:
        """Why the attempt must stop now (None: it may go on)."""
        name = self.stage.step
        if self.timeout is not None and time.monotonic() - self.began > self.timeout:
            return StepTimeout(f"step {name!r} was cancelled after {self.timeout}s")
        return self.ctx.stop_reason(self.deadline) if self.ctx is not None else None

    def _cancel(self) -> None:
        first = self.cancelled_at is None
        if first:
            self.cancelled_at = time.monotonic()
            log.info("spark: cancelling %s: %s", self.stage.job_group, self.reason)
        if self.stage.bound:
            spark = self.stage.spark
            if self.resource.is_connect:
                spark.interruptTag(self.stage.job_group)
            else:
                spark.sparkContext.cancelJobGroup(self.stage.job_group)
        if first and self.reason is not None:
            self.stage.cancel_external(self.reason)

    def _progress(self) -> None:
        if self.resource.is_connect or not self.stage.bound:
            return  # Spark Connect has no status tracker on the client
        now = time.monotonic()
        if now - self._last_progress < self.progress_interval:
            return
        self._last_progress = now
        snapshot = stage_progress(self.stage.spark, self.stage.job_group)
        self.stage.progress = snapshot
        if snapshot and snapshot != self._last_snapshot:
            self._last_snapshot = snapshot
            if self.ctx is not None:
                report_progress({"spark_stages": snapshot}, context=self.ctx)
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
