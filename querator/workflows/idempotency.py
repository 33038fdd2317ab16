"""Idempotency keys and their reuse policy: which run a keyed ``start`` gets.

A key names a chain of runs, its *generations*: generation 0 is the run id
derived from the key alone (``run-`` + ``sha256(key)[:32]``, as always),
generation *g* ≥ 1 ``run-`` + ``sha256(f"{key}\\x00{g}")[:32]``. A start looks
the latest generation up (one lookup of a window of generations) and decides by
its :data:`IdReusePolicy`, as Temporal's ``WorkflowIdReusePolicy``:

- ``"use_existing"`` (the default): the run with the key, whatever its status
  (a start returns its handle; its first arguments win);
- ``"allow_duplicate_failed_only"``: the run with the key unless it failed,
  was cancelled or was compensated; then a new run, the next generation. A run
  that continued as new is judged by the last run of its chain (the start
  follows the chain: one lookup per continuation);
- ``"reject_duplicate"``: :class:`~querator.workflows.errors.RunExists` while
  any run with the key is stored (until it is purged).

Two starts racing with one key write the same run id: the store keeps one
meta record (its dedup key), and the start whose nonce it holds created the
run; the other gets that run (or ``RunExists``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal, get_args

from querator.errors import InvalidArgument, QueueNotFound
from querator.queue.service import AsyncQueueClient
from querator.workflows.keys import RESULTS_QUEUE, meta_key, new_run_id, result_key, resume_key
from querator.workflows.stored import RunMeta, RunRecord, RunStatus

__all__ = [
    "REUSABLE_AFTER",
    "IdReusePolicy",
    "KeyedRun",
    "check_reuse_policy",
    "keyed_run_id",
    "latest_keyed_run",
    "reuses",
]

IdReusePolicy = Literal["use_existing", "allow_duplicate_failed_only", "reject_duplicate"]
"""What a start with an idempotency key does when a run with the key exists
(see the module doc)."""

REUSABLE_AFTER: tuple[RunStatus, ...] = ("failed", "cancelled", "compensated")
"""Under ``"allow_duplicate_failed_only"``: the statuses after which a key starts a new run."""

WINDOW = 8
"""Generations looked up at once."""


def check_reuse_policy(policy: object) -> IdReusePolicy | None:
    """``policy`` checked (None: not given)."""
    if policy is not None and policy not in get_args(IdReusePolicy):
        allowed = ", ".join(repr(p) for p in get_args(IdReusePolicy))
        raise InvalidArgument("id_reuse_policy", f"must be one of {allowed}, got {policy!r}")
    return policy  # type: ignore[return-value]


def keyed_run_id(key: str, generation: int) -> str:
    """The run id of generation ``generation`` of idempotency key ``key``."""
    if generation == 0:
        return new_run_id(key)
    return "run-" + hashlib.sha256(f"{key}\x00{generation}".encode()).hexdigest()[:32]


@dataclass(frozen=True)
class KeyedRun:
    """The latest run of an idempotency key."""

    generation: int
    run_id: str
    meta: RunMeta
    status: RunStatus
    """``running`` until it ended (a saga compensating included)."""


async def latest_keyed_run(aq: AsyncQueueClient, key: str, follow: bool = False) -> KeyedRun | None:
    """The latest stored generation of ``key`` (None: no run has the key);
    ``follow``: its status is that of the last run of its continue-as-new chain."""
    latest: KeyedRun | None = None
    start = 0
    while True:
        ids = [keyed_run_id(key, g) for g in range(start, start + WINDOW)]
        keys = [k for run_id in ids for k in (meta_key(run_id), result_key(run_id))]
        try:
            found = await aq.lookup(RESULTS_QUEUE, keys + [resume_key(i) for i in ids])
        except QueueNotFound:
            return None  # the first run of this store
        for offset, run_id in reversed(list(enumerate(ids))):
            meta = found.get(meta_key(run_id))
            if meta is None:
                continue
            status: RunStatus = "running"
            result = found.get(result_key(run_id))
            if result is not None and resume_key(run_id) not in found:
                record = RunRecord.model_validate_json(result.payload)
                status = record.final_status()
                if follow and record.continued_as is not None:
                    status = await _chain_status(aq, record.continued_as)
            parsed = RunMeta.model_validate_json(meta.payload)
            latest = KeyedRun(start + offset, run_id, parsed, status)
            break
        if latest is None or latest.generation < start + WINDOW - 1:
            return latest
        start += WINDOW


async def _chain_status(aq: AsyncQueueClient, run_id: str) -> RunStatus:
    """The status of the last run of the continue-as-new chain from ``run_id``."""
    while True:
        keys = [result_key(run_id), resume_key(run_id)]
        found = await aq.lookup(RESULTS_QUEUE, keys)
        result = found.get(result_key(run_id))
        if result is None or resume_key(run_id) in found:
            return "running"
        record = RunRecord.model_validate_json(result.payload)
        if record.continued_as is None:
            return record.final_status()
        run_id = record.continued_as


def reuses(policy: IdReusePolicy, latest: KeyedRun) -> bool:
    """Whether a start under ``policy`` gets ``latest`` (False: a new generation;
    ``"reject_duplicate"`` is the caller's to raise)."""
    if policy == "allow_duplicate_failed_only":
        return latest.status not in REUSABLE_AFTER
    return True
