"""Turning driver errors into querator errors: retryable, the request's fault,
or the operator's.

PostgreSQL says what went wrong with a SQLSTATE; its class decides:

- **retryable** (:class:`~querator.errors.Unavailable`): the connection or the
  server went away (``08``, ``57P01``-``57P05``), the session was cut short or
  is unfit for now (``57014`` canceled, ``55P03`` lock timeout, ``25006``
  read-only during a failover, ``25P03`` idle in transaction), contention
  (``40``: serialization failure, deadlock), or too many clients or too little
  memory for now (``53200``, ``53300``); and every driver error without a
  SQLSTATE (a broken connection); and, on a Citus coordinator, an internal
  error (``XX000``) or an I/O error (``58030``) that says the coordinator lost
  its connection to a worker node in the middle of a command
  (:func:`lost_citus_node`): the node restarted or went away, as a lost
  connection of its own would say;
- **the request's fault** (:class:`~querator.errors.InvalidArgument`): a value
  the store cannot hold (``22``: out of range, bad encoding), a constraint a
  value broke (``23``), a limit of the store passed (``54``: a row or an
  index entry too large);
- **the operator's** (:class:`~querator.errors.StoreFault`): everything else:
  a full disk (``53100``), a privilege or an object missing (``42``), an I/O
  error or corruption (``58``, ``XX``).

Each becomes one line of querator's own words, with the SQLSTATE, never the
server's raw text (which can quote values and carries CONTEXT lines).
"""

from __future__ import annotations

import psycopg
from psycopg import errors as pg_errors

from querator.errors import (
    InvalidArgument,
    QueratorError,
    QueueNotFound,
    StoreFault,
    Unavailable,
)

RETRYABLE_CLASSES = ("08", "40", "57")
"""SQLSTATE classes that pass: connections, contention, operator intervention."""
RETRYABLE_STATES = ("55P03", "25006", "25P03", "53200", "53300")
"""SQLSTATEs outside those classes that pass too (lock timeout, read-only,
idle-in-transaction timeout, out of memory, too many connections)."""
CITUS_COMMAND_CONTEXT = "while executing command on"
"""The context line a Citus coordinator adds to an error met on a worker node."""
CITUS_LOST_CONNECTION = (
    "server closed the connection unexpectedly",
    "SSL SYSCALL error",
    "invalid socket",
    "connection not open",
)
"""What a Citus coordinator's connection to a worker node says when it broke
during a command (with :data:`CITUS_COMMAND_CONTEXT`)."""
CITUS_LOST_NODE = (
    "failure on connection marked as essential",
    "failed to COPY to shard",
)
"""How a Citus coordinator's own errors begin when its connection to a worker
node broke in a transaction, or in the middle of a ``COPY`` to it."""
CITUS_LOST_STATES = ("XX000", "58030")
"""The SQLSTATEs a Citus 13.2 coordinator reports a lost worker node with
(internal error, I/O error)."""
REQUEST_CLASSES = ("22", "23", "54")
"""SQLSTATE classes that are the request's fault (data, constraints, limits)."""


def _words(exc: psycopg.Error) -> str:
    """What the error is, in words (its class name spelt out), with its SQLSTATE."""
    name = type(exc).__name__
    spelt = "".join(f" {c.lower()}" if c.isupper() else c for c in name).strip()
    return f"{spelt} (SQLSTATE {exc.sqlstate})"


def lost_citus_node(exc: psycopg.Error) -> bool:
    """Whether ``exc`` is a Citus coordinator's report of a broken connection to
    one of its worker nodes (a node restarting, or gone)."""
    if exc.sqlstate not in CITUS_LOST_STATES:
        return False
    text = str(exc)
    if text.startswith(CITUS_LOST_NODE):
        return True
    return CITUS_COMMAND_CONTEXT in text and any(phrase in text for phrase in CITUS_LOST_CONNECTION)


def classify(exc: psycopg.Error, queue: str | None = None) -> QueratorError:
    """The querator error that stands for ``exc`` (see the module docstring).

    A missing table means the queue was deleted concurrently: QueueNotFound
    when the call acts on ``queue``.
    """
    state = exc.sqlstate
    if isinstance(exc, pg_errors.UndefinedTable) and queue is not None:
        return QueueNotFound(queue)
    if state is None:  # raised by the driver itself
        if isinstance(exc, pg_errors.DataError):
            return InvalidArgument("request", f"the store cannot hold a value: {exc}")
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return Unavailable(f"PostgreSQL unreachable: {first}")
    if state[:2] in RETRYABLE_CLASSES or state in RETRYABLE_STATES or lost_citus_node(exc):
        return Unavailable(f"PostgreSQL unavailable: {_words(exc)}")
    if state[:2] in REQUEST_CLASSES:
        return InvalidArgument("request", f"the store cannot hold a value: {_words(exc)}")
    return StoreFault(f"PostgreSQL: {_words(exc)}", state)


class driver_errors:  # lower case: used as a function, ``with driver_errors(queue):``
    """Turn psycopg errors raised inside the block into querator errors
    (:func:`classify`). Querator errors raised inside pass through unchanged.

    A class rather than a ``@contextmanager`` generator: it wraps every
    statement, and costs three Python calls a block instead of six."""

    __slots__ = ("queue",)

    def __init__(self, queue: str | None = None) -> None:
        self.queue = queue

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if isinstance(exc, psycopg.Error):
            raise classify(exc, self.queue) from exc


TRANSIENT_REFUSALS = (
    "starting up",
    "shutting down",
    "in recovery mode",
    "not yet accepting connections",
    "too many clients",
    "remaining connection slots",
)
"""What a server says when it refuses a connection for now, not for good."""


async def refuse_bad_dsn(conninfo: str, timeout: float) -> None:
    """Connect once: InvalidArgument when the server refuses the connection string
    for good (``FATAL: database "x" does not exist``, a role, a password),
    Unavailable when it cannot be reached or refuses for now."""
    try:
        conn = await psycopg.AsyncConnection.connect(conninfo, connect_timeout=max(1, int(timeout)))
    except psycopg.Error as exc:
        text = str(exc)
        fatal = text.partition("FATAL:")[2].strip().splitlines()
        if fatal and not any(phrase in fatal[0] for phrase in TRANSIENT_REFUSALS):
            raise InvalidArgument("dsn", f"PostgreSQL refused it: {fatal[0]}") from exc
        raise Unavailable(f"PostgreSQL: {text.splitlines()[0]}") from exc
    await conn.close()
