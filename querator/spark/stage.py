"""``SparkStage``: what a Spark stage function receives first."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from querator.errors import InvalidArgument
from querator.spark.session import SparkResource
from querator.spark.storage import (
    Storage,
    UncommittedInput,
    is_committed,
    is_local_path,
    storage_for,
)
from querator.spark.submission import (
    ExternalJobFailed,
    SubmissionMarker,
    clear_submission,
    write_submission,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SparkStage"]

log = logging.getLogger("querator.spark")

T = TypeVar("T")


@dataclass
class SparkStage:
    """What a Spark stage function receives first.

    ``spark`` is the worker's session. ``output`` is where this attempt writes
    (a staging directory, committed to ``final`` when the function returns);
    None when the step was called without ``output=``. Read inputs through
    :meth:`input` so a stage never reads an uncommitted location. A stage whose
    job runs on a cluster in cluster mode submits it with :meth:`submit_once`.
    """

    resource: SparkResource = field(repr=False)
    """Where the session comes from (the worker's :class:`SparkResource`)."""
    output: str | None
    final: str | None
    step: str
    run_id: str | None = None
    position: int | None = None
    attempt: int = 1
    job_group: str = ""
    submission_tag: str = ""
    """Deterministic per step call (``querator-<run>-<position>``), the same in
    every attempt: :meth:`submit_once` gives it to the submitter."""
    job_id: str | None = None
    """The external job of :meth:`submit_once`, once submitted or re-attached."""
    progress: list[dict[str, Any]] = field(default_factory=list)
    """The last progress snapshot: one dict per Spark stage of this attempt's jobs."""
    recorded: SubmissionMarker | None = field(default=None, repr=False)
    """The submission an earlier attempt of this step call recorded (see :meth:`submit_once`)."""
    _session: SparkSession | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _cancel_hooks: list[Callable[[], None]] = field(default_factory=list, init=False, repr=False)
    _hooks_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _stopped: BaseException | None = field(default=None, init=False, repr=False)
    _submitted: bool = field(default=False, init=False, repr=False)

    @property
    def spark(self) -> SparkSession:
        """The worker's session. Its first use in an attempt starts it when the
        worker has none yet (a stage that only submits to a cluster never starts
        a local driver) and puts the calling thread's Spark jobs under
        :attr:`job_group`, so cancelling the attempt cancels them."""
        with self._lock:
            if self._session is None:
                session = self.resource.session()
                _bind(session, self.resource, self.job_group, self.step)
                self._session = session
            return self._session

    @property
    def bound(self) -> bool:
        """True once :attr:`spark` was used in this attempt (its jobs carry the group)."""
        return self._session is not None

    def unbind(self) -> None:
        """Take the calling thread's later Spark jobs out of this attempt's group."""
        session = self._session
        if session is None:
            return
        if self.resource.is_connect:
            session.removeTag(self.job_group)
        else:
            session.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
            session.sparkContext.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]

    def storage(self, path: str) -> Storage:
        """The storage of ``path``; a Hadoop file system uses (and starts) the session."""
        return storage_for(path, None if is_local_path(path) else self.spark)

    @property
    def output_path(self) -> str:
        """:attr:`output`, for a stage that must write: :class:`InvalidArgument` when
        the step was called without ``output=``."""
        if self.output is None:
            raise InvalidArgument("output", f"step {self.step!r} was called without output=")
        return self.output

    def input(self, path: str) -> str:
        """``path`` if it holds a committed output; :class:`UncommittedInput` if not."""
        if not is_committed(path, self.storage(path)):
            raise UncommittedInput(f"step {self.step!r}: {path!r} holds no committed output")
        return path

    def submit_once(
        self,
        submit: Callable[[str], str],
        wait: Callable[[str], T],
        *,
        cancel: Callable[[str], None] | None = None,
    ) -> T:
        """Submit an external job at most once per step call, then wait for it.

        ``submit(tag)`` starts the job (``tag`` is :attr:`submission_tag`; the job
        should write to :attr:`output`) and returns its external id;
        ``wait(job_id)`` blocks until it ends and returns what the stage needs
        (raising :class:`ExternalJobFailed` when it failed); ``cancel(job_id)``,
        when given, stops it and is called when the attempt is cancelled (the
        run's cancellation or deadline, the step's ``timeout``).

        The submission is recorded in the output's staging area
        (``P._staging/submission.json``) before ``submit`` is called (the tag)
        and again before ``wait`` (the job id). An attempt of the same step call
        that finds the job id (a retry, a crash, an expired lease) skips
        ``submit`` and calls ``wait`` on the recorded job: it re-attaches, and
        :attr:`output` is the submitting attempt's staging path. When it finds
        only the tag (a crash during ``submit``) it calls ``submit`` again with
        the same tag: a submitter that finds a running or finished job by its
        tag (as :class:`~querator.spark.SparkSubmit` does) then submits nothing.
        :class:`ExternalJobFailed` from ``wait`` removes the record (the next
        attempt submits a fresh job); any other exception keeps it. Committing
        the stage removes it with the staging area.

        One external job per step call; the step must be called with ``output=``.
        An attempt already being cancelled raises its reason instead of submitting.
        """
        final, output = self.final, self.output
        if final is None or output is None:
            raise InvalidArgument(
                "output", f"step {self.step!r}: submit_once needs the step called with output="
            )
        if self._submitted:
            raise InvalidArgument("submit_once", f"step {self.step!r}: one external job per call")
        self._submitted = True
        if self._stopped is not None:
            raise self._stopped
        storage = self.storage(final)
        job_id = self.recorded.job_id if self.recorded is not None else None
        if job_id is not None:
            log.info(
                "run %s step %s@%s: re-attaching to job %s (submitted by attempt %d)",
                self.run_id,
                self.step,
                self.position,
                job_id,
                self.recorded.attempt if self.recorded is not None else 0,
            )
        else:
            job_id = self._submit(storage, final, output, submit)
        self.job_id = job_id
        hook = (lambda: cancel(job_id)) if cancel is not None else None
        if hook is not None:
            with self._hooks_lock:
                self._cancel_hooks.append(hook)
                stopped = self._stopped
            if stopped is not None:  # cancelled while submitting: the watch missed this job
                hook()
        try:
            return wait(job_id)
        except ExternalJobFailed:
            clear_submission(storage, final)
            log.info(
                "run %s step %s@%s: job %s failed", self.run_id, self.step, self.position, job_id
            )
            raise
        finally:
            if hook is not None:
                with self._hooks_lock:
                    self._cancel_hooks.remove(hook)

    def _submit(
        self, storage: Storage, final: str, output: str, submit: Callable[[str], str]
    ) -> str:
        intent = self.recorded or SubmissionMarker(
            step=self.step,
            run_id=self.run_id,
            position=self.position,
            attempt=self.attempt,
            tag=self.submission_tag,
            output=output,
        )
        if self.recorded is None:
            write_submission(storage, final, intent)
        job_id = submit(self.submission_tag)
        if not isinstance(job_id, str) or not job_id:
            raise InvalidArgument("submit", f"must return the external job id, got {job_id!r}")
        write_submission(
            storage, final, intent.model_copy(update={"job_id": job_id, "attempt": self.attempt})
        )
        log.info(
            "run %s step %s@%s: submitted job %s (tag %s)",
            self.run_id,
            self.step,
            self.position,
            job_id,
            self.submission_tag,
        )
        return job_id

    def cancel_external(self, reason: BaseException) -> None:
        """The attempt is being cancelled (the watch calls this once, with why):
        cancel the external job being waited on; :meth:`submit_once` submits no more."""
        with self._hooks_lock:
            self._stopped = reason
            hooks = list(self._cancel_hooks)
        for hook in hooks:
            try:
                hook()
            except Exception as exc:
                log.warning("spark: cancelling the job of %s failed: %r", self.job_group, exc)


def _bind(session: SparkSession, resource: SparkResource, group: str, step: str) -> None:
    """Put the calling thread's Spark jobs under ``group`` (a job group or a Connect tag)."""
    if resource.is_connect:
        session.addTag(group)
    else:
        session.sparkContext.setJobGroup(group, step, interruptOnCancel=True)
