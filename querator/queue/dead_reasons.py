"""Why an item was dead-lettered, as its dead letter carries it.

A dead letter keeps the headers of its item plus three of querator's own:
:data:`ATTEMPTS_HEADER`, the leases the item had in its source queue (the dead
letter's own ``attempts`` count its leases in the dead queue, from 0),
:data:`REASON_HEADER`, why it was moved: the ``reason`` given to
``retry(..., dead=True, reason=...)``, or what querator decided (attempts used
up, expired), and :data:`SOURCE_HEADER`, the name of the queue it came from
(several queues may share one dead queue: their dead letters are told apart
by it). Requeueing a dead letter drops them. Pure functions; every backend
writes the same marks, in the statement that moves the item.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = [
    "ATTEMPTS_HEADER",
    "EXPIRED",
    "MARKS",
    "MAX_REASON",
    "REASON_HEADER",
    "RETRIED_DEAD",
    "SOURCE_HEADER",
    "clean_reason",
    "exhausted",
    "marked",
    "retry_reason",
    "source_queue",
    "sweep_reason",
    "unmarked",
]

ATTEMPTS_HEADER: Final = "querator-dead-attempts"
"""Header of a dead letter: how many leases the item had in its source queue."""
REASON_HEADER: Final = "querator-dead-reason"
"""Header of a dead letter: why it was dead-lettered."""
SOURCE_HEADER: Final = "querator-dead-source"
"""Header of a dead letter: the name of the queue it was dead-lettered from."""
MARKS: Final = (ATTEMPTS_HEADER, REASON_HEADER, SOURCE_HEADER)
"""The headers dead-lettering adds (and requeueing drops)."""
MAX_REASON: Final = 2_000
"""Characters of a reason kept (a longer one is cut, ending with an ellipsis)."""

RETRIED_DEAD: Final = "moved by retry(dead=True)"
"""The reason of ``retry(dead=True)`` called without one."""
EXPIRED: Final = "expired: still unfinished at its expire_at"
"""The reason of an item that expired."""


def exhausted(max_attempts: int) -> str:
    """The reason of an item that used all its attempts."""
    return f"used all {max_attempts} attempts (max_attempts)"


def clean_reason(reason: str) -> str:
    """``reason`` as a header holds it: without NUL characters, at most
    :data:`MAX_REASON` characters."""
    text = reason.replace("\x00", "")
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "\u2026"


def retry_reason(given: str | None, dead: bool, max_attempts: int) -> str:
    """Why a retry dead-letters an item: the reason given, else ``dead=True``,
    else its attempts are used up."""
    if given is not None:
        return given
    return RETRIED_DEAD if dead else exhausted(max_attempts)


def sweep_reason(attempts: int, max_attempts: int) -> str:
    """Why the maintenance sweep dead-letters an unheld item."""
    return exhausted(max_attempts) if 0 < max_attempts <= attempts else EXPIRED


def marked(headers: Mapping[str, str], attempts: int, reason: str, source: str) -> dict[str, str]:
    """The headers of the dead letter of an item with ``headers``, moved from
    queue ``source``."""
    return {**headers, ATTEMPTS_HEADER: str(attempts), REASON_HEADER: reason, SOURCE_HEADER: source}


def unmarked(headers: Mapping[str, str]) -> dict[str, str]:
    """``headers`` without the dead-letter marks (a requeued copy's)."""
    return {k: v for k, v in headers.items() if k not in MARKS}


def source_queue(headers: Mapping[str, str]) -> str | None:
    """The queue a dead letter came from; None for a letter written before
    querator recorded it."""
    return headers.get(SOURCE_HEADER)
