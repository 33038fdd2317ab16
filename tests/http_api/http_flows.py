"""Workflows served by the HTTP tests' server (``--app``) and their worker.

Persisted names are explicit: the server imports this file by path, the test
process as a package module.
"""

from __future__ import annotations

import anyio

from querator.workflows import RetryPolicy, step, workflow

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
