"""Cluster-mode submissions, recorded before waiting so a retried stage re-attaches.

A stage whose Spark job runs elsewhere (``spark-submit --deploy-mode cluster``,
a Livy batch, a Databricks run …) submits it through
:meth:`SparkStage.submit_once <querator.spark.SparkStage.submit_once>`. The
record of the submission lives in the stage's staging area of output ``P``:

- ``P._staging/submission.json``: a :class:`SubmissionMarker` — which step call
  (step, run, position) submitted, under which deterministic tag, where the job
  writes (the staging path of the submitting attempt) and, once the submitter
  returned it, the external job id.

It is written twice: before submitting (the intent: tag and output, no job id)
and right after (with the job id), each time whole (temporary file, then one
rename). An attempt that finds the record of its own step call keeps the
staging area instead of deleting it, and re-attaches to the job instead of
submitting. The record goes with the staging area when the stage commits, and
is removed when the job failed (:class:`ExternalJobFailed`), so the retry
submits anew.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field

from querator.spark.storage import Storage, staging_root
from querator.workflows.errors import WorkflowError

__all__ = [
    "SUBMISSION",
    "ExternalJobFailed",
    "SubmissionMarker",
    "clear_submission",
    "read_submission",
    "submission_path",
    "submission_tag",
    "write_submission",
]

SUBMISSION = "submission.json"


class ExternalJobFailed(WorkflowError):
    """A submitted external job ended without success (failed, cancelled or lost).

    Raised by a submitter's ``wait`` (such as :meth:`SparkSubmit.wait
    <querator.spark.SparkSubmit.wait>`). :meth:`SparkStage.submit_once
    <querator.spark.SparkStage.submit_once>` then removes the recorded
    submission, so the step's next attempt submits a fresh job. Any other
    exception from ``wait`` (the cluster unreachable, a bug in the poller)
    keeps the record: the next attempt re-attaches to the same job.
    """

    def __init__(self, job_id: str, message: str) -> None:
        self.job_id = job_id
        self.reason = message
        super().__init__(f"external job {job_id}: {message}")


class SubmissionMarker(BaseModel):
    """``P._staging/submission.json``: the external job of one step call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step: str
    run_id: str | None = None
    position: int | None = None
    attempt: int = 0
    """The attempt that submitted."""
    tag: str
    """The deterministic submission tag (:func:`submission_tag`)."""
    output: str
    """Where the job writes: the submitting attempt's staging path."""
    job_id: str | None = None
    """The external job id; None while the submission is being made."""
    submitted_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    def same_call(self, step: str, run_id: str | None, position: int | None) -> bool:
        """True when this record was written by that step call of that run."""
        return run_id is not None and (self.step, self.run_id, self.position) == (
            step,
            run_id,
            position,
        )


def submission_tag(step: str, run_id: str | None, position: int | None) -> str:
    """The tag of a step call's submission: ``querator-<run>-<position>``.

    The same for every attempt of the call (a submitter may find its job on the
    cluster by it: YARN application tags, a job name); only
    ``[A-Za-z0-9_.-]``. Outside a workflow it names the step, uniquely.
    """
    if run_id is None or position is None:
        raw = f"querator-{step}-inline-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%f')}"
    else:
        raw = f"querator-{run_id}-{position}"
    return re.sub(r"[^A-Za-z0-9_.-]", "-", raw)


def submission_path(final: str) -> str:
    """Where the submission record of the stage writing ``final`` lives."""
    return f"{staging_root(final)}/{SUBMISSION}"


def read_submission(storage: Storage, final: str) -> SubmissionMarker | None:
    """The recorded submission of the stage writing ``final`` (None: none)."""
    text = storage.read_text(submission_path(final))
    return SubmissionMarker.model_validate_json(text) if text else None


def write_submission(storage: Storage, final: str, marker: SubmissionMarker) -> None:
    """Record (or replace) the submission, whole: readers see the old or the new one."""
    storage.write_text(submission_path(final), marker.model_dump_json())


def clear_submission(storage: Storage, final: str) -> None:
    """Forget the recorded submission (the job failed: the next attempt submits anew)."""
    storage.delete(submission_path(final))
