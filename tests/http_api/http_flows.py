"""Workflows served by the HTTP tests' server (``--app``) and their worker.

Persisted names are explicit: the server imports this file by path, the test
process as a package module.
"""

from __future__ import annotations

import anyio

from querator.workflows import RetryPolicy, saga, step, workflow

QUEUE = "http.flows"


@step(name="http.shout")
def shout(text: str) -> str:
    """Upper-case ``text``."""
    return text.upper()


@workflow(name="http.greet", queue=QUEUE)
def greet(name: str, punctuation: str = "!") -> str:
    """``HELLO, <NAME>!`` through one step."""
    return shout(f"hello, {name}") + punctuation


@step(name="http.explode", retry=RetryPolicy(max_attempts=1))
def explode(reason: str) -> str:
    """Fail for good."""
    raise ValueError(reason)


@workflow(name="http.doomed", queue=QUEUE)
def doomed(reason: str) -> str:
    """A run that fails."""
    return explode(reason)


@step(name="http.dawdle")
async def dawdle(seconds: float) -> float:
    """Take a while."""
    await anyio.sleep(seconds)
    return seconds


@workflow(name="http.slow", queue=QUEUE)
async def slow(seconds: float) -> float:
    """A run that lasts long enough to be cancelled."""
    first = await dawdle(seconds)
    return first + await dawdle(seconds)


@step(name="http.book", retry=RetryPolicy(max_attempts=1))
def book(what: str) -> str:
    """Book ``what`` (``"fail"``: refused for good)."""
    if what == "fail":
        raise ValueError("sold out")
    return f"{what}-ref"


@book.compensate(retry=RetryPolicy(max_attempts=1))
def unbook(what: str, ref: str | None) -> None:
    """Undo a booking."""


@saga(name="http.trip")
def trip(first: str, second: str, third: str) -> list[str]:
    """Three bookings, undone in reverse when one fails."""
    return [book(first), book(second), book(third)]
