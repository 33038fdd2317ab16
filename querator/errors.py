"""Every error querator raises, under one root.

```
QueratorError                 base of everything querator raises
├── InvalidArgument           bad input: names the field and the rule (not retryable)
├── QueueNotFound             the named queue does not exist (not retryable)
├── QueueExists               create_queue on a name that is taken (not retryable)
├── QueueNotEmpty             delete_queue of a queue that holds items, without force
├── Conflict                  one or more items failed a check; carries per-id reasons
├── RequestTimeout            a long poll found nothing before its timeout (retryable)
├── Unavailable               the store could not be reached or failed (retryable)
├── StoreFault                the store refused for a reason its operator must fix
│                             (full disk, missing privilege, damaged table; not retryable)
├── Unauthorized              the HTTP API got no valid bearer token (401)
├── Forbidden                 the token's scopes do not allow the call (403)
├── UsageError                the API was used in a way that cannot work (closed client,
│                             a sync call inside a running event loop)
├── SchemaTooNew              the store's schema is newer than this querator knows
├── LockLost                  a lock's permit was lost before its release (querator.locks)
└── WorkflowError             (querator.workflows.errors: the workflow layer's own)
    ├── StepFailed            a step failed for good; carries its error type and message
    ├── NonDeterminism        replay met a different step than the history holds
    ├── WorkflowFailed        run.result() of a run that failed
    ├── WorkflowCancelled     run.result() of a run that was cancelled
    ├── WorkflowTimeout       a run passed its deadline
    ├── StepTimeout           a step ran past its timeout
    └── Defer                 raised by a step: run me again in N seconds (not a failure)
```

The workflow errors live one layer up, because the queue layer knows nothing
of workflows; they subclass :class:`QueratorError` like every other error here.

Driver errors are wrapped (``raise Unavailable(...) from exc``) so callers never
need to import psycopg, SQLAlchemy or sqlite3 to handle failures.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

__all__ = [
    "Conflict",
    "ConflictReason",
    "Forbidden",
    "InvalidArgument",
    "LockLost",
    "QueratorError",
    "QueueExists",
    "QueueNotEmpty",
    "QueueNotFound",
    "RequestTimeout",
    "SchemaTooNew",
    "StoreFault",
    "Unauthorized",
    "Unavailable",
    "UsageError",
]


class QueratorError(Exception):
    """Base of every error querator raises."""

    retryable: bool = False
    """True when the same call may succeed if sent again unchanged."""


class InvalidArgument(QueratorError, ValueError):
    """An argument broke a rule; nothing was changed.

    ``field`` names the argument (or ``items[3].payload``) and ``rule`` says what
    was expected.
    """

    def __init__(self, field: str, rule: str) -> None:
        self.field = field
        self.rule = rule
        super().__init__(f"invalid {field}: {rule}")


class QueueNotFound(QueratorError, LookupError):
    """The named queue does not exist."""

    def __init__(self, queue: str) -> None:
        self.queue = queue
        super().__init__(f"queue {queue!r} does not exist")


class QueueExists(QueratorError):
    """``create_queue`` was called with a name that is already taken."""

    def __init__(self, queue: str) -> None:
        self.queue = queue
        super().__init__(f"queue {queue!r} already exists")


class QueueNotEmpty(QueratorError):
    """``delete_queue`` of a queue that still holds ``count`` items, without
    ``force``; nothing was deleted."""

    def __init__(self, queue: str, count: int) -> None:
        self.queue = queue
        self.count = count
        super().__init__(
            f"queue {queue!r} holds {count} item(s); delete it with force=True to drop them"
        )


class ConflictReason(StrEnum):
    """Why one item failed a check inside a multi-item call."""

    MISSING = "missing"
    """No item with that id exists (completed, deleted, dead-lettered or never made)."""
    STALE = "stale"
    """The item exists but its version differs: someone changed it since."""
    NOT_LEASED = "not_leased"
    """The version matches but no lease holds it now (never leased, or the lease expired)."""
    LEASED = "leased"
    """The version matches but a live lease holds it (``transact(delete=...)``
    deletes only items no one holds)."""


class Conflict(QueratorError):
    """One or more items failed their id/version/lease check; nothing was changed.

    ``reasons`` maps each offending item id to a :class:`ConflictReason`.
    """

    def __init__(self, reasons: Mapping[str, ConflictReason]) -> None:
        self.reasons: dict[str, ConflictReason] = dict(reasons)
        listed = ", ".join(f"{item_id}: {reason.value}" for item_id, reason in self.reasons.items())
        super().__init__(f"{len(self.reasons)} item(s) failed their checks: {listed}")


class RequestTimeout(QueratorError, TimeoutError):
    """A call waited its whole timeout: a long poll in which no item became
    available, or a ``resume`` whose run's children (cancelled by the run's end)
    had not ended yet — nothing was written; sending it again may succeed."""

    retryable = True


class Unavailable(QueratorError):
    """The store could not be reached, failed mid-call, or did not answer within its
    deadline; sending the call again may succeed.

    Mostly the call changed nothing. A call that broke off while its commit was
    in flight (a lost connection, a commit cut off at the statement deadline)
    may have taken effect. Calls that name item versions (complete, retry,
    renew, transact) never apply twice when sent again; a produce adds no second
    copy when its items carry a ``dedup_key``.
    """

    retryable = True


class StoreFault(QueratorError):
    """The store refused the call for a reason that sending it again will not
    cure and that is not the request's fault: a full disk, a missing privilege,
    a table dropped or damaged under querator. Its operator must act.

    ``reason`` says what in one line (never the driver's raw text); ``code`` is
    the store's own code for it when it has one (PostgreSQL's SQLSTATE).
    """

    def __init__(self, reason: str, code: str | None = None) -> None:
        self.reason = reason
        self.code = code
        super().__init__(f"the store refused the call: {reason}; its operator must act")


class Unauthorized(QueratorError):
    """The HTTP API was called without a valid bearer token."""


class Forbidden(QueratorError):
    """The bearer token is valid but its scopes do not allow the call."""


class UsageError(QueratorError):
    """The API was used in a way that cannot work: a closed client, or a sync
    call made inside a running event loop (use the async twin instead)."""


class SchemaTooNew(QueratorError):
    """The store was migrated by a newer querator to a schema this one cannot use.

    ``store_version`` is the store's schema version, ``known_version`` the newest
    this querator knows, and ``required_version`` the oldest a client must know
    to use the store. Upgrade querator (or restore the store from before the
    migration); nothing was changed.
    """

    def __init__(self, store: str, store_version: int, required_version: int, known_version: int):
        self.store = store
        self.store_version = store_version
        self.required_version = required_version
        self.known_version = known_version
        super().__init__(
            f"the {store} has schema version {store_version}, which needs a querator that knows"
            f" version {required_version} or newer; this querator knows versions up to"
            f" {known_version}: upgrade querator"
        )


class LockLost(QueratorError):
    """A permit of a lock or semaphore was lost while held: its lease expired
    before a renewal reached the store (a pause, an outage), so another holder
    may have had it since. Raised by the release; ``token`` is the fencing token
    the holder had, which any store guarded by it now refuses.
    """

    def __init__(self, name: str, token: int) -> None:
        self.name = name
        self.token = token
        super().__init__(
            f"the permit of {name!r} with fencing token {token} was lost while held: its"
            " lease expired before it was renewed, so another holder may have had it"
        )
