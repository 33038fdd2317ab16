"""Metrics of workflow runs and their steps (OpenTelemetry instruments).

- ``querator.workflow.runs.started`` (counter): ``querator.workflow.name``;
- ``querator.workflow.runs.ended`` (counter): ``querator.workflow.name``,
  ``querator.run.status``;
- ``querator.workflow.step.duration`` (histogram, seconds): ``querator.step.name``,
  ``querator.queue``, ``querator.step.outcome``;
- ``querator.workflow.step.attempts`` (counter): the same attributes.

``runs.ended``'s status is the run's final status: ``completed``, ``failed``,
``cancelled`` or ``compensated`` (a saga whose compensations all ran). A run is
counted as started by the process that created it (``start``, a schedule's
tick, a rerun, a parent's child call) and as ended by the worker whose commit
stored its result. The instruments are created once, from the global meter
provider: the API's proxies until an SDK is configured, which they then follow.
"""

from __future__ import annotations

from functools import cache

from opentelemetry.metrics import Counter, Histogram

from querator.telemetry import meter

__all__ = [
    "RUNS_ENDED",
    "RUNS_STARTED",
    "STATUS",
    "STEP_ATTEMPTS",
    "STEP_DURATION",
    "run_ended",
    "run_started",
    "step_ended",
]

RUNS_STARTED = "querator.workflow.runs.started"
RUNS_ENDED = "querator.workflow.runs.ended"
STEP_DURATION = "querator.workflow.step.duration"
STEP_ATTEMPTS = "querator.workflow.step.attempts"
STATUS = "querator.run.status"

_WORKFLOW = "querator.workflow.name"
_STEP = "querator.step.name"
_QUEUE = "querator.queue"
_OUTCOME = "querator.step.outcome"


class _Instruments:
    """The instruments, created on first use."""

    def __init__(self) -> None:
        m = meter()
        self.started: Counter = m.create_counter(
            RUNS_STARTED, unit="{run}", description="Workflow runs created."
        )
        self.ended: Counter = m.create_counter(
            RUNS_ENDED, unit="{run}", description="Workflow runs that ended, by final status."
        )
        self.duration: Histogram = m.create_histogram(
            STEP_DURATION, unit="s", description="Duration of step attempts, by outcome."
        )
        self.attempts: Counter = m.create_counter(
            STEP_ATTEMPTS, unit="{attempt}", description="Step attempts, by outcome."
        )


@cache
def _instruments() -> _Instruments:
    return _Instruments()


@cache
def _step_attributes(step: str, queue: str, outcome: str) -> dict[str, str]:
    return {_STEP: step, _QUEUE: queue, _OUTCOME: outcome}


def run_started(workflow: str) -> None:
    """Count a run of ``workflow`` created."""
    _instruments().started.add(1, {_WORKFLOW: workflow})


def run_ended(workflow: str, status: str) -> None:
    """Count a run of ``workflow`` ended with ``status``."""
    _instruments().ended.add(1, {_WORKFLOW: workflow, STATUS: status})


def step_ended(step: str, queue: str, outcome: str, seconds: float) -> None:
    """Count one attempt of ``step`` and its duration."""
    attributes = _step_attributes(step, queue, outcome)
    found = _instruments()
    found.duration.record(seconds, attributes)
    found.attempts.add(1, attributes)
