"""querator's internal queues seen from the HTTP API.

Queues named ``querator.…`` hold querator's own state: tokens, run records,
workflow wake tasks, schedules, webhook endpoints and deliveries. The generic
queue endpoints (``/v1/queue.*``, ``/v1/queues.*``, ``/v1/storage/*``) may
read them (stats, lists, lookups: what an operator inspects) but never change
them — no produce, lease, complete, retry, renew, transact, clear, import,
delete, create or update, whatever the token — and never read the tokens
queue at all. querator's own endpoints (workflows, runs, schedules, dead
letters) change them through the library, by their rules.

The library itself does not refuse these names: a library client holds the
store's URL, so it already has every right the database grants, and
querator's layers write their queues through that same client.
"""

from __future__ import annotations

from pydantic import BaseModel

from querator.errors import Forbidden
from querator.http.auth import TOKENS_QUEUE

PREFIX = "querator."
"""Queues under this prefix are querator's own."""


def is_internal(name: str) -> bool:
    """True for a queue that belongs to querator (``querator.…``)."""
    return name.startswith(PREFIX)


def queues_named(body: BaseModel) -> set[str]:
    """Every queue a request body names: the queue it acts on, the queues of
    its item references and produces, a run's queue, a dead queue it would set."""
    named = {getattr(body, name, None) for name in ("queue_name", "queue", "dead_queue")}
    for group in ("complete", "retry", "renew", "depends", "delete"):  # a lease's: its queue's
        named |= {getattr(ref, "queue_name", None) for ref in getattr(body, group, ())}
    for group in ("produce", "produce_leased", "lookup"):
        named |= set(getattr(body, group, {}) or {})
    named |= set(getattr(body, "silent", ()) or ())
    return {name for name in named if isinstance(name, str)}


def guard(body: BaseModel, writes: bool) -> None:
    """Forbidden when a generic queue call would change an internal queue
    (``writes``) or read the tokens queue."""
    named = queues_named(body)
    guard_tokens(named)
    internal = sorted(name for name in named if is_internal(name))
    if writes and internal:
        raise Forbidden(
            f"access denied; '{internal[0]}' is internal to querator: the queue "
            "endpoints may read it but never change it"
        )


def guard_tokens(named: set[str]) -> None:
    """Forbidden when any call names the tokens queue (a run's queue included)."""
    if TOKENS_QUEUE in named:
        raise Forbidden(
            f"access denied; '{TOKENS_QUEUE}' is internal to querator: "
            "manage tokens with querator tokens create, list and revoke"
        )
