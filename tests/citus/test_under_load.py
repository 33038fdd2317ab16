"""A namespace on Citus under load while it moves, or while its worker node
restarts: nothing lost, nothing completed twice, every run finishes.

The load is the fault suite's (tests/faults), pointed at one namespace on the
coordinator: a producer and two consumers (``faults/queue_proc.py``), two
workflow workers (``workflows/live_worker.py``) serving ``live.loop`` runs
that the test starts at a steady pace, all OS processes. Once both rates are
steady the event comes:

- ``move``: ``querator namespaces move`` moves the namespace to the other
  worker node (Citus copies it by logical replication; writes wait at the switch);
- ``fast-restart`` / ``immediate-restart``: the worker node holding the
  namespace restarts (``pg_ctl restart -m fast|immediate``); the coordinator
  and querator's connections to it stay up, its connections to the worker break.

Then the same figures as the fault suite on plain PostgreSQL, with the same
assertions: no item lost or completed twice, none left, no run lost, stuck,
failed or missing a step, and the completion rates (items and steps) back
within :data:`RECOVERY_BOUND` seconds of the event's end, as are the last calls
failing Unavailable. The bound is the fault suite's 2 s plus 3 s: three servers
and the load share the machine's cores, a workflow step costs about 10 times
its plain-PostgreSQL time through the coordinator (docs/scale-out.md), and at a
load average of 12 the step rate once came back in 2.3 s. One line per test is
printed (``citus-load ...``).
"""

from __future__ import annotations

import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from faults.harness import (
    PRE_FAULT_SECONDS,
    FaultWindow,
    errors_after,
    fmt,
    poll,
    recovery,
)
from faults.load import (
    LIVE_WORKER,
    STEPS,
    STOP_TIMEOUT,
    DoneClock,
    Journals,
    Outcome,
    Starter,
    not_stored,
    run_result,
    spawn_queue_proc,
    stop_procs,
    stop_workers,
)
from pg_schemas import drop_schema
from polling import wait_for
from typer.testing import CliRunner
from workflows.ops_procs import WorkerProc, read_log, spawn_worker

from querator import Querator, QueueSettings
from querator.cli import app
from querator.queue.backends.namespaces import with_namespace

from .cluster import CitusCluster

EVENTS = ["move", "fast-restart", "immediate-restart"]
NAMESPACE = "load"
QUEUE = "jobs"
CONSUMERS = 2
WORKERS = 2
RATE = 40.0
"""Items produced per second."""
STEP_SECONDS = "0.1"
"""``$LIVE_STEP_SECONDS``: how long each step's side effect takes."""
MIN_RUNS = 30
"""Runs started before the starter stops (at least: it runs until both rates are back)."""
RECOVERY_BOUND = 5.0
"""Seconds from the event's end within which the rates must be back (see above)."""
RECOVERY_DEADLINE = 45.0
FINISH_DEADLINE = 60.0
"""Seconds after the event within which every item and run must be done."""


@pytest.fixture
def store(citus: CitusCluster) -> Iterator[str]:
    """The base schema of a fresh store on the coordinator; it and its
    namespace's schema are dropped after the test."""
    base = f"c_{secrets.token_hex(6)}"
    yield base
    for schema in (base, f"{base}__{NAMESPACE}"):
        drop_schema(citus.dsn, schema)


def _event(citus: CitusCluster, base_url: str, schema: str, event: str) -> FaultWindow:
    """Move the namespace, or restart its worker node; returns once it is over."""
    source = citus.node_of(schema)
    began = time.time()
    if event == "move":
        target = next(w.port for w in citus.workers if w.port != source)
        to_node = f"127.0.0.1:{target}"
        moved = CliRunner().invoke(
            app, ["namespaces", "move", NAMESPACE, "--to-node", to_node, "--url", base_url]
        )
        assert moved.exit_code == 0, moved.output
        assert citus.node_of(schema) == target
    else:
        node = next(w for w in citus.workers if w.port == source)
        node.restart("fast" if event == "fast-restart" else "immediate")
    return FaultWindow(event, began, time.time())


@dataclass
class Seen:
    """What the load did around the event."""

    window: FaultWindow
    logs: list[Path]
    steps: Path
    step_times: list[float]
    starter: Starter
    outcomes: dict[str, tuple[Outcome, str]] = field(default_factory=dict)
    lost_runs: list[str] = field(default_factory=list)
    finished_at: float = 0.0
    crashed: list[str] = field(default_factory=list)
    exits: list[int | None] = field(default_factory=list)
    unavailable: Counter[str] = field(default_factory=Counter)


def _serving(worker: WorkerProc) -> Callable[[], bool]:
    return lambda: "serving" in worker.stderr()


def _steady(logs: list[Path], clock: DoneClock) -> None:
    """Wait for a first completion and a first step, then for steady rates."""
    first = max(
        wait_for(lambda: Journals.read(logs).done_times[:1], timeout=60)[0],
        wait_for(lambda: clock.times[:1], timeout=60, message="a first step")[0],
    )
    wait_for(
        lambda: time.time() >= first + PRE_FAULT_SECONDS + 0.5,
        timeout=PRE_FAULT_SECONDS + 5,
        interval=0.1,
    )


def _load(citus: CitusCluster, store: str, event: str, tmp_path: Path) -> Seen:
    """The producer, the consumers, the workflow workers and the starter; the
    event once the rates are steady; then every run's result and the drain."""
    url = with_namespace(citus.url(store), NAMESPACE)
    logs = [tmp_path / "producer.log", *(tmp_path / f"consumer-{n}.log" for n in range(CONSUMERS))]
    clock = DoneClock(tmp_path / "steps.log")
    producer = spawn_queue_proc(
        tmp_path, "producer", "produce", url, QUEUE, str(logs[0]), str(RATE)
    )
    consumers = [
        spawn_queue_proc(tmp_path, f"consumer-{n}", "consume", url, QUEUE, str(log), f"c{n}")
        for n, log in enumerate(logs[1:])
    ]
    workers: list[WorkerProc] = []
    with Querator(url) as client:
        seen = Seen(FaultWindow(event, 0, 0), logs, clock.log, clock.times, Starter(client))
        try:
            env = {"LIVE_STEP_SECONDS": STEP_SECONDS}
            for n in range(WORKERS):
                workers.append(
                    spawn_worker(
                        url, f"w{n}", clock.log, "--poll", "1", script=LIVE_WORKER, env=env
                    )
                )
            for worker in workers:
                wait_for(_serving(worker), timeout=60, message=f"worker {worker.name} serves")
            clock.start()
            seen.starter.start()
            _steady(logs, clock)
            seen.crashed = [str(p.args) for p in [producer, *consumers] if p.poll() is not None]
            seen.window = window = _event(citus, citus.url(store), f"{store}__{NAMESPACE}", event)

            def recovered() -> bool:
                now = time.time()
                items = recovery(Journals.read(logs).done_times, window, until=now)[1]
                return items is not None and recovery(clock.times, window, until=now)[1] is not None

            poll(recovered, timeout=RECOVERY_DEADLINE)
            poll(lambda: len(seen.starter.runs) >= MIN_RUNS, timeout=RECOVERY_DEADLINE)
            seen.starter.halt.set()
            seen.starter.join(timeout=STOP_TIMEOUT)
            seen.exits += stop_procs([producer])
            deadline = time.monotonic() + (window.ended + FINISH_DEADLINE - time.time())
            runs = dict(seen.starter.runs)
            for key, run in runs.items():
                seen.outcomes[key] = run_result(run, deadline, seen.unavailable)
            left = max(1.0, deadline - time.monotonic())
            poll(lambda: not Journals.read(logs).unaccounted(), timeout=left)
            seen.finished_at = time.time()
            seen.crashed += [str(p.args) for p in consumers if p.poll() is not None]
            seen.exits += stop_procs(consumers)
            seen.lost_runs = [
                key
                for key, (outcome, _) in seen.outcomes.items()
                if outcome == "unfinished" and not_stored(runs[key], seen.unavailable)
            ]
        finally:
            seen.starter.halt.set()
            clock.halt.set()
            seen.exits += stop_workers(workers)
            stop_procs([producer, *consumers])
    return seen


def _figures(seen: Seen, url: str) -> dict[str, object]:
    """The fault suite's figures (tests/faults), for the queue and the runs."""
    journals = Journals.read(seen.logs)
    with Querator(url) as q:  # a fresh client: nothing left from before the event
        missing = journals.unaccounted()
        keys = [f"s{journals.produced[item_id]}" for item_id in missing]
        in_queue = {item.id for item in q.lookup(QUEUE, keys).values()} if keys else set()
        left = q.stats(QUEUE).total
    done = Counter((key, pos) for verb, key, pos, _ in read_log(seen.steps) if verb == "done")
    by: dict[Outcome, list[str]] = {"ok": [], "wrong": [], "failed": [], "unfinished": []}
    for key, (outcome, _) in seen.outcomes.items():
        by[outcome].append(key)
    item_rate, items_back = recovery(journals.done_times, seen.window, until=seen.finished_at)
    step_rate, steps_back = recovery(seen.step_times, seen.window, until=seen.finished_at)
    failing = sorted([*journals.unavailable_times, *seen.starter.unavailable_times])
    return {
        "event": seen.window.name,
        "produced": len(journals.produced),
        "lost": sorted(missing - in_queue),
        "twice": sorted(item_id for item_id, count in journals.done.items() if count > 1),
        "left": left,
        "unsure": len(journals.unsure),
        "runs": len(seen.outcomes),
        "lost_runs": seen.lost_runs,
        "stuck": [key for key in by["unfinished"] if key not in seen.lost_runs],
        "failed": {key: seen.outcomes[key] for key in (*by["failed"], *by["wrong"])},
        "rerun": sum(count - 1 for count in done.values()),
        "missing_steps": [(k, p) for k in by["ok"] for p in range(STEPS) if (k, p) not in done],
        "item_rate": f"{item_rate:.0f}/s",
        "step_rate": f"{step_rate:.0f}/s",
        "event_s": fmt(seen.window.seconds),
        "items_back_s": items_back,
        "steps_back_s": steps_back,
        "errors_after_s": errors_after(failing, seen.window),
        "unavailable": sum(journals.unavailable.values()) + seen.starter.unavailable,
        "exits": seen.exits,
    }


@pytest.mark.timeout(300)
@pytest.mark.parametrize("event", EVENTS)
def test_a_namespace_under_load_loses_nothing(
    event: str, citus: CitusCluster, store: str, tmp_path: Path
) -> None:
    url = with_namespace(citus.url(store), NAMESPACE)
    with Querator(url) as q:
        q.create_queue(QUEUE, QueueSettings(lease_timeout=5.0, partitions=2))
    seen = _load(citus, store, event, tmp_path)
    got = _figures(seen, url)
    counted = {
        k: len(v) if isinstance(v, list | dict) and k != "exits" else v for k, v in got.items()
    }
    print(
        "\ncitus-load "
        + " ".join(
            f"{k}={fmt(v) if isinstance(v, float) or v is None else v}" for k, v in counted.items()
        )
    )
    errors = {p.name: p.read_text()[-2000:] for p in tmp_path.glob("*.err") if p.read_text()}
    assert seen.starter.error is None, repr(seen.starter.error)
    assert not seen.crashed, f"processes died: {seen.crashed}\n{errors}"
    for figure in ("lost", "twice", "lost_runs", "stuck", "failed", "missing_steps"):
        assert not got[figure], f"{figure} after the {event}: {got[figure]}"
    assert got["left"] == 0, f"items still in the queue {FINISH_DEADLINE}s after the {event}"
    for back in ("items_back_s", "steps_back_s", "errors_after_s"):
        value = got[back]
        shown = fmt(value) if isinstance(value, float) else value
        assert isinstance(value, float) and value <= RECOVERY_BOUND, (
            f"{back}={shown} after the {event}\n{errors}"
        )
