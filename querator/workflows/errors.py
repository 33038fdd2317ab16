"""Errors of the workflow layer, under :class:`querator.errors.QueratorError`.

```
QueratorError
└── WorkflowError             base of the workflow layer's errors
    ├── StepFailed            a step failed for good (raised at its call site in the body)
    ├── NonDeterminism        replay called a different step than the stored history
    ├── WorkflowFailed        RunHandle.result(): the run ended with an error
    │   └── SagaFailed        RunHandle.result() of a saga that failed (compensated or not)
    ├── WorkflowCancelled     RunHandle.result(): the run was cancelled
    ├── WorkflowTimeout       a run outlived its ``@workflow(timeout=)`` (stored as its error)
    ├── StepTimeout           a step attempt outlived its ``@step(timeout=)``
    ├── ResultNotEncodable    a step returned what its annotation cannot store (not retried)
    ├── RunNotFound           no run is stored under that id
    ├── RunFinished           a message sent to a run that has ended
    ├── IdempotencyConflict   the key is taken by a run of another workflow
    ├── RunExists             start(id_reuse_policy="reject_duplicate"): a run has the key
    └── Defer                 raised by a step: run me again later (not a failure)
```
"""

from __future__ import annotations

from querator.errors import InvalidArgument, QueratorError

__all__ = [
    "Defer",
    "IdempotencyConflict",
    "NonDeterminism",
    "ResultNotEncodable",
    "RunExists",
    "RunFinished",
    "RunNotFound",
    "SagaFailed",
    "StepFailed",
    "StepTimeout",
    "WorkflowCancelled",
    "WorkflowError",
    "WorkflowFailed",
    "WorkflowTimeout",
]


class WorkflowError(QueratorError):
    """Base of the workflow layer's errors."""


class StepFailed(WorkflowError):
    """A step failed for good (its retry policy gave up).

    Raised inside the workflow body where the step was called; ``error_type``
    and ``message`` describe the step's last exception.
    """

    def __init__(self, step: str, position: int, error_type: str, message: str) -> None:
        self.step = step
        self.position = position
        self.error_type = error_type
        self.message = message
        super().__init__(f"step {step!r} (position {position}) failed: {error_type}: {message}")


class NonDeterminism(WorkflowError):
    """Replay called a step that differs from the one stored at that position.

    The workflow code changed under a running workflow (or the body is not
    deterministic). The run stops with this error; other runs are untouched.
    """

    def __init__(self, position: int, stored: str, called: str) -> None:
        self.position = position
        self.stored = stored
        self.called = called
        super().__init__(
            f"non-deterministic replay at step position {position}: history has "
            f"{stored!r}, the code now calls {called!r}"
        )


class WorkflowFailed(WorkflowError):
    """The run ended with an error (``error_type``, ``message``)."""

    def __init__(self, run_id: str, error_type: str, message: str) -> None:
        self.run_id = run_id
        self.error_type = error_type
        self.message = message
        super().__init__(f"run {run_id} failed: {error_type}: {message}")


class SagaFailed(WorkflowFailed):
    """A saga did not complete: ``error_type``/``message`` say why (the original
    error), ``status`` is ``"compensated"``, ``"compensation_failed"``,
    ``"cancelled"`` or ``"failed"``, and ``compensations`` lists the
    compensations that ran, in order (``"name@position"``: the position of the
    step they undid).
    """

    def __init__(
        self,
        run_id: str,
        error_type: str,
        message: str,
        status: str,
        compensations: tuple[str, ...] = (),
    ) -> None:
        super().__init__(run_id, error_type, message)
        self.status = status
        self.compensations = compensations
        ran = ", ".join(compensations) if compensations else "none"
        self.args = (
            f"saga {run_id} {status} after {error_type}: {message} (compensations run: {ran})",
        )


class WorkflowCancelled(WorkflowError):
    """The run was cancelled (``RunHandle.cancel``) before it ended."""

    def __init__(self, run_id: str, reason: str) -> None:
        self.run_id = run_id
        self.reason = reason
        super().__init__(f"run {run_id} was cancelled" + (f": {reason}" if reason else ""))


class WorkflowTimeout(WorkflowError):
    """The run was still going at its deadline (``@workflow(timeout=...)``).

    Stored as the run's error: ``RunHandle.result()`` raises
    :class:`WorkflowFailed` with ``error_type == "WorkflowTimeout"``.
    """


class StepTimeout(WorkflowError):
    """One attempt of a step took longer than its ``timeout``; retried per its policy."""


class Defer(WorkflowError):
    """Raised inside a step: run the step again after ``seconds``.

    Not a failure: the deferred attempt does not count against the step's
    :class:`~querator.workflows.RetryPolicy`.
    """

    def __init__(self, seconds: float) -> None:
        if not 0 <= seconds <= 366 * 86400:
            raise InvalidArgument("seconds", f"must be within 0 … 366 days, not {seconds!r}")
        self.seconds = float(seconds)
        super().__init__(f"step deferred by {self.seconds}s")


class ResultNotEncodable(WorkflowError):
    """A step returned a value its return annotation cannot serialise (``None``
    for ``-> str``, say): a bug, not a transient failure, so it is not retried."""


class RunNotFound(WorkflowError, LookupError):
    """No run is stored under ``run_id`` (a typo, or a run whose records expired)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"no run {run_id!r} is stored")


class RunFinished(WorkflowError):
    """``send`` to a run that has ended: no ``recv`` of it would ever read the message."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"run {run_id!r} has ended: it receives no more messages")


class IdempotencyConflict(WorkflowError):
    """``start`` got an idempotency key already used by a run of *another*
    workflow (``workflow``): keys are not shared between workflows."""

    def __init__(self, key: str, run_id: str, workflow: str, wanted: str) -> None:
        self.key = key
        self.run_id = run_id
        self.workflow = workflow
        super().__init__(
            f"idempotency key {key!r} belongs to run {run_id} of workflow {workflow!r}, "
            f"not {wanted!r}"
        )


class RunExists(WorkflowError):
    """``start`` with ``id_reuse_policy="reject_duplicate"`` got an idempotency
    key a stored run (``run_id``, ``status``) already has."""

    def __init__(self, key: str, run_id: str, status: str) -> None:
        self.key = key
        self.run_id = run_id
        self.status = status
        super().__init__(
            f"idempotency key {key!r} is taken by run {run_id} ({status}), "
            "and the id_reuse_policy is 'reject_duplicate'"
        )
