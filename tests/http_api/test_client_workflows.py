"""The HTTP client's workflow methods (``querator.http.Querator``): start,
await, inspect, cancel, resume, fork and schedule runs with no store access,
the library's return types and exceptions (the server knows the workflows by
``--app``; a worker runs them on the store)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from http_server import serve
from worker_threads import serving

from querator import Querator, Worker
from querator.errors import InvalidArgument, RequestTimeout
from querator.http import AsyncQuerator as AsyncHttpQuerator
from querator.http import Querator as HttpQuerator
from querator.interface import Client
from querator.workflows import RunNotFound, SagaFailed, WorkflowCancelled, WorkflowFailed

from . import http_flows
from .http_flows import doomed, greet, slow, trip

FLOWS = Path(http_flows.__file__)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Querator]]:
    """The URL of a server over a fresh SQLite store, with a worker on that
    store, and a library client of the store."""
    url = f"sqlite:///{tmp_path / 'flows.db'}"
    with (
        serve(url, "--app", str(FLOWS)) as found,
        Querator(url) as q,
        serving(Worker(q, [greet, doomed, slow, trip])),
    ):
        yield found, q


@pytest.fixture
def base(served: tuple[str, Querator]) -> str:
    """The URL of the server of :func:`served`."""
    return served[0]


def drive(q: Client) -> None:
    """What a process without database access does (typed by the interface)."""
    run = q.start(greet, "ada", punctuation="?", idempotency_key="greet-ada")
    assert q.start(greet, "ada", punctuation="?", idempotency_key="greet-ada").run_id == run.run_id
    assert run.result(timeout=30) == "HELLO, ADA?"
    assert run.status() == "completed"
    info = q.get_run(run.run_id)
    assert (info.workflow, [s.step for s in info.steps]) == ("http.greet", ["http.shout"])
    assert [r.run_id for r in q.list_runs(workflow="http.greet")] == [run.run_id]
    # eager: the library client runs it itself; over HTTP it is ignored (workers run it)
    assert q.start(greet, "bob", eager=True).result(timeout=30) == "HELLO, BOB!"
    with pytest.raises(WorkflowFailed) as failed:
        q.start(doomed, "no").result(timeout=30)
    assert failed.value.error_type == "StepFailed"


def test_a_process_without_the_store_drives_runs_over_http(base: str) -> None:
    with HttpQuerator(base) as q:
        drive(q)
        long = q.start(slow, 0.3)
        with pytest.raises(RequestTimeout):
            long.result(timeout=0.05)
        assert long.cancel("enough") is True
        with pytest.raises(WorkflowCancelled):
            long.result(timeout=30)
        assert q.resume(long.run_id) is True
        assert q.run(long.run_id).result(timeout=30) == 0.6
        fork = q.fork(long.run_id, from_step=1)
        assert fork.run_id != long.run_id and fork.result(timeout=30) == 0.6
        with pytest.raises(RunNotFound):
            q.run("nope").status()


def test_the_library_client_drives_runs_the_same_way(served: tuple[str, Querator]) -> None:
    _, q = served
    drive(q)  # the same code, typed by the same interface, over the store


def _schedules(q: Client) -> None:
    """Schedules driven through the interface (a library or an HTTP client)."""
    q.schedule("nightly", greet, cron="0 3 * * *", args=("night",), jitter=1.5)
    [listed] = q.list_schedules()
    assert (listed.name, listed.workflow, listed.paused) == ("nightly", "http.greet", False)
    assert q.get_schedule("nightly").name == "nightly"
    q.pause_schedule("nightly", "maintenance")
    assert q.list_schedules()[0].paused and q.get_schedule("nightly").paused
    q.resume_schedule("nightly")
    assert q.trigger_schedule("nightly").result(timeout=30) == "HELLO, NIGHT!"
    assert q.delete_schedule("nightly") is True
    assert q.list_schedules() == []
    with pytest.raises(InvalidArgument, match="no schedule 'nightly'"):
        q.get_schedule("nightly")


def test_schedules_are_driven_over_http_as_over_the_store(
    served: tuple[str, Querator],
) -> None:
    base, library = served
    with HttpQuerator(base) as q:
        _schedules(q)
    _schedules(library)


def test_the_async_client_starts_and_awaits_runs(base: str) -> None:
    async def main() -> str:
        async with AsyncHttpQuerator(base) as aq:
            run = await aq.start("http.greet", "bob")  # by name: plain JSON arguments
            result: str = await run.result(timeout=30)
            return result

    assert anyio.run(main) == "HELLO, BOB!"


def test_a_failed_saga_names_its_compensations_over_http(served: tuple[str, Querator]) -> None:
    base, q = served
    with HttpQuerator(base) as http:
        for client in (http, q):  # the HTTP client raises what the library raises
            run = client.start(trip, "flight", "hotel", "fail")
            with pytest.raises(SagaFailed) as failed:
                run.result(timeout=30)
            assert (failed.value.status, failed.value.error_type) == ("compensated", "StepFailed")
            assert failed.value.compensations == (
                "http.book.compensate@1",
                "http.book.compensate@0",
            )
            assert "sold out" in failed.value.message


def _purge(q: Client, who: str) -> None:
    """purge_runs through the interface: finished runs go, with their records."""
    run = q.start(greet, who)
    assert run.result(timeout=30) == f"HELLO, {who.upper()}!"
    later = datetime.now(UTC) + timedelta(seconds=5)
    with pytest.raises(InvalidArgument, match="status"):
        q.purge_runs(before=later, status="running")
    with pytest.raises(InvalidArgument, match="before"):
        q.purge_runs(before=datetime.now())  # naive
    assert q.get_run(run.run_id).status == "completed"  # refused calls purged nothing
    assert q.purge_runs(before=later, workflow="http.greet", status=["completed"]) == 1
    with pytest.raises(RunNotFound):
        q.get_run(run.run_id)
    assert q.purge_runs(before=later, workflow="http.greet") == 0


def test_finished_runs_are_purged_over_http_as_over_the_store(
    served: tuple[str, Querator],
) -> None:
    base, library = served
    with HttpQuerator(base) as q:
        _purge(q, "http")
    _purge(library, "lib")


def test_runs_are_replayed_with_the_servers_code_and_reindexed(
    served: tuple[str, Querator],
) -> None:
    base, q = served
    with HttpQuerator(base) as http:
        run = http.start(greet, "eve")
        assert run.result(timeout=30) == "HELLO, EVE!"
        check = http.check_replay(run.run_id)
        assert (check.ok, check.workflow, check.replayed, check.ended) == (
            True,
            "http.greet",
            1,
            True,
        )
        assert check == q.check_replay(run.run_id, [greet])  # the library's answer
        with pytest.raises(RunNotFound):
            http.check_replay("run-never-started")
        with pytest.raises(InvalidArgument, match="functions"):
            http.check_replay(run.run_id, [greet])  # the server's code replays, not ours
        with pytest.raises(InvalidArgument, match="functions"):
            q.check_replay(run.run_id)
        assert http.reindex_runs() == q.reindex_runs() == 1


def test_a_server_without_workflow_code_refuses_a_replay(server: str) -> None:
    async def main() -> None:
        async with AsyncHttpQuerator(server) as aq:
            with pytest.raises(InvalidArgument) as refused:
                await aq.check_replay("run-any")
            assert refused.value.field == "app" and "--app" in refused.value.rule
            assert await aq.reindex_runs() == 0

    anyio.run(main)
