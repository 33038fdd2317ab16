"""Idempotency-key reuse policies (``id_reuse_policy``): per workflow and per
start call, racing starts with one key included."""

from __future__ import annotations

import threading
from contextlib import ExitStack
from typing import Any

import pytest

from querator import Querator
from querator.errors import InvalidArgument
from querator.workflows import (
    IdempotencyConflict,
    RunExists,
    RunHandle,
    WorkflowFailed,
    continue_as_new,
    recv,
    send,
    start,
    workflow,
)
from querator.workflows.idempotency import IdReusePolicy, keyed_run_id
from querator.workflows.keys import RESULTS_QUEUE, meta_key

from .conftest import RunWorker


@workflow(name="reuse.maybe")
def maybe(fail: bool) -> str:
    """Fails when asked to."""
    if fail:
        raise ValueError("asked to fail")
    return "ok"


@workflow(name="reuse.strict", id_reuse_policy="reject_duplicate")
def strict(x: int) -> int:
    """A workflow whose keys are never reused."""
    return x


@workflow(name="reuse.waits")
def waits() -> str:
    """Runs until it gets a message."""
    return str(recv("go"))


@workflow(name="reuse.chain")
def chain(left: int, fail: bool) -> str:
    """Continues as new ``left`` times, then fails when asked to."""
    if left > 0:
        continue_as_new(left - 1, fail)
    if fail:
        raise ValueError("the chain's last run failed")
    return "ok"


FLOWS = [maybe, strict, waits, chain]


def test_use_existing_is_the_default(q: Querator, run_worker: RunWorker) -> None:
    with run_worker(FLOWS):
        first = start(q, maybe, True, idempotency_key="k-default")
        with pytest.raises(WorkflowFailed):
            first.result(timeout=30)
        again = start(q, maybe, False, idempotency_key="k-default")
        assert again.run_id == first.run_id == keyed_run_id("k-default", 0)
        assert again.status() == "failed"


def test_allow_duplicate_failed_only_starts_anew_after_a_failure(
    q: Querator, run_worker: RunWorker
) -> None:
    policy: IdReusePolicy = "allow_duplicate_failed_only"
    with run_worker(FLOWS):
        failed = start(q, maybe, True, idempotency_key="k-retry", id_reuse_policy=policy)
        with pytest.raises(WorkflowFailed):
            failed.result(timeout=30)
        second = start(q, maybe, False, idempotency_key="k-retry", id_reuse_policy=policy)
        assert second.run_id == keyed_run_id("k-retry", 1) != failed.run_id
        assert second.result(timeout=30) == "ok"
        third = start(q, maybe, True, idempotency_key="k-retry", id_reuse_policy=policy)
        assert third.run_id == second.run_id  # completed: reused
        assert failed.status() == "failed"  # the old run is kept as it was
        # a run still going is reused too; a cancelled one is not
        going = start(q, waits, idempotency_key="k-wait", id_reuse_policy=policy)
        assert start(q, waits, idempotency_key="k-wait", id_reuse_policy=policy).run_id == (
            going.run_id
        )
        going.cancel()
        next_one = _when_not(q, going.run_id, policy)
        send(q, next_one.run_id, "go", 1)
        assert next_one.result(timeout=30) == "1"


def _when_not(q: Querator, run_id: str, policy: IdReusePolicy) -> RunHandle[str]:
    """A start with key k-wait once run ``run_id`` (cancelled) has ended."""
    from polling import wait_for

    wait_for(lambda: RunHandle(q, run_id).status() == "cancelled", timeout=30)
    handle = start(q, waits, idempotency_key="k-wait", id_reuse_policy=policy)
    assert handle.run_id == keyed_run_id("k-wait", 1)
    return handle


def test_reject_duplicate_refuses_while_a_run_has_the_key(
    q: Querator, run_worker: RunWorker
) -> None:
    with run_worker(FLOWS):
        run = start(q, strict, 1, idempotency_key="k-strict")  # the workflow's policy
        with pytest.raises(RunExists) as refused:
            start(q, strict, 2, idempotency_key="k-strict")
        assert refused.value.run_id == run.run_id and refused.value.key == "k-strict"
        assert run.result(timeout=30) == 1
        with pytest.raises(RunExists, match="completed"):
            start(q, strict, 3, idempotency_key="k-strict")
        # a start call overrides the workflow's policy
        again = start(q, strict, 4, idempotency_key="k-strict", id_reuse_policy="use_existing")
        assert again.run_id == run.run_id
        start(q, maybe, False, idempotency_key="k-other", id_reuse_policy="reject_duplicate")
        with pytest.raises(RunExists):  # a workflow without a policy, refused per call
            start(q, maybe, False, idempotency_key="k-other", id_reuse_policy="reject_duplicate")
        with pytest.raises(IdempotencyConflict):  # another workflow's key: as before
            start(q, maybe, False, idempotency_key="k-strict")


def test_a_bad_policy_is_refused_before_anything_is_written(q: Querator) -> None:
    bad: Any = "sometimes"
    with pytest.raises(InvalidArgument, match="id_reuse_policy"):
        start(q, maybe, False, idempotency_key="k-bad", id_reuse_policy=bad)
    with pytest.raises(InvalidArgument, match="id_reuse_policy"):
        workflow(name="reuse.bad", id_reuse_policy=bad)(lambda: None)
    try:
        found = q.lookup(RESULTS_QUEUE, [meta_key(keyed_run_id("k-bad", 0))])
    except Exception:  # the results queue does not even exist
        found = {}
    assert found == {}


def _race(
    q: Querator, backend_url: str, policy: IdReusePolicy, key: str, fail: bool
) -> list[RunHandle[str] | Exception]:
    """Two starts with ``key`` released at once, each on a client of its own
    (memory:// lives in one client: there they share it)."""
    outcomes: list[RunHandle[str] | Exception] = []
    barrier = threading.Barrier(2, timeout=10)
    with ExitStack() as stack:
        other = q if backend_url == "memory://" else stack.enter_context(Querator(backend_url))
        clients = [q, other]

        def one(client: Querator) -> None:
            barrier.wait()
            try:
                outcomes.append(
                    start(client, maybe, fail, idempotency_key=key, id_reuse_policy=policy)
                )
            except Exception as exc:
                outcomes.append(exc)

        threads = [threading.Thread(target=one, args=(c,)) for c in clients]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    assert len(outcomes) == 2
    return outcomes


def test_two_starts_racing_with_one_key(
    q: Querator, run_worker: RunWorker, backend_url: str
) -> None:
    for n in range(5):
        outcomes = _race(q, backend_url, "reject_duplicate", f"race-{n}", False)
        handles = [o for o in outcomes if isinstance(o, RunHandle)]
        refused = [o for o in outcomes if isinstance(o, RunExists)]
        assert (len(handles), len(refused)) == (1, 1), outcomes
        assert refused[0].run_id == handles[0].run_id
        # the same key, each under "use_existing": one run for both
        same = _race(q, backend_url, "use_existing", f"same-{n}", False)
        assert {o.run_id for o in same if isinstance(o, RunHandle)} == {
            keyed_run_id(f"same-{n}", 0)
        }
    with run_worker(FLOWS):
        first = start(q, maybe, True, idempotency_key="again")
        with pytest.raises(WorkflowFailed):
            first.result(timeout=30)
        # both racing starts see the failure and start one new generation
        racing = _race(q, backend_url, "allow_duplicate_failed_only", "again", False)
        ids = {o.run_id for o in racing if isinstance(o, RunHandle)}
        assert ids == {keyed_run_id("again", 1)}
        assert RunHandle(q, keyed_run_id("again", 1)).result(timeout=30) == "ok"


def test_allow_duplicate_failed_only_judges_a_chain_by_its_last_run(
    q: Querator, run_worker: RunWorker
) -> None:
    policy: IdReusePolicy = "allow_duplicate_failed_only"
    with run_worker(FLOWS):
        failed = start(q, chain, 2, True, idempotency_key="k-chain", id_reuse_policy=policy)
        with pytest.raises(WorkflowFailed):
            failed.result(timeout=30)  # follows the chain to its last run
        anew = start(q, chain, 1, False, idempotency_key="k-chain", id_reuse_policy=policy)
        assert anew.run_id == keyed_run_id("k-chain", 1) != failed.run_id
        assert anew.result(timeout=30) == "ok"
        kept = start(q, chain, 0, True, idempotency_key="k-chain", id_reuse_policy=policy)
        assert kept.run_id == anew.run_id  # its chain completed: reused
