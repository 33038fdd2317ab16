"""The load the fault tests put on a store, and how they read what it did.

The queue's: the producer and consumers of ``queue_proc.py`` (OS processes)
and :class:`Journals`, what they journaled. The workflows': a
:class:`Starter` of ``live.loop`` runs at a steady pace, served by
``workflows/live_worker.py`` processes whose steps journal to ``$OPS_LOG``,
a :class:`DoneClock` of the steps done, and :func:`run_result` of each run.
Used by tests/faults and by the Citus load tests (tests/citus).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from workflows import live_flows
from workflows.ops_procs import WorkerProc, read_log

from querator import Querator
from querator.errors import InvalidArgument, RequestTimeout, Unavailable
from querator.workflows import RunHandle, WorkflowError, start
from querator.workflows.errors import RunNotFound

from .harness import until_available

PROC = Path(__file__).with_name("queue_proc.py")
"""The producer and consumer processes' script."""
LIVE_WORKER = Path(live_flows.__file__).with_name("live_worker.py")
"""The workflow worker processes' script."""
STEPS = 5
EXPECTED = sum(range(STEPS))
"""What ``live.loop(key, STEPS)`` returns."""
START_EVERY = 0.2
"""Seconds between two starts: about 25 steps per second in a steady state."""
STOP_TIMEOUT = 30.0
"""Seconds a stopped process (SIGTERM) has to exit before it is killed."""

Outcome = Literal["ok", "wrong", "failed", "unfinished"]


@dataclass
class Journals:
    """What the producer and the consumers journaled so far."""

    produced: dict[str, int] = field(default_factory=dict)
    """Item id -> sequence number."""
    done: Counter[str] = field(default_factory=Counter)
    done_seqs: Counter[int] = field(default_factory=Counter)
    done_times: list[float] = field(default_factory=list)
    unsure: set[str] = field(default_factory=set)
    unavailable: Counter[str] = field(default_factory=Counter)
    unavailable_times: list[float] = field(default_factory=list)
    conflicts: int = 0

    @classmethod
    def read(cls, paths: list[Path]) -> Journals:
        journals = cls()
        for path in paths:
            if path.exists():
                for line in path.read_text().splitlines():
                    journals._add(line.split())
        journals.done_times.sort()
        return journals

    def _add(self, parts: list[str]) -> None:
        match parts:
            case ["produced", seq, item_id, _]:
                self.produced[item_id] = int(seq)
            case ["done", item_id, seq, stamp]:
                self.done[item_id] += 1
                self.done_seqs[int(seq)] += 1
                self.done_times.append(float(stamp))
            case ["unsure" | "abandoned", item_id, *_]:
                self.unsure.add(item_id)
            case ["conflict", *_]:
                self.conflicts += 1
            case ["unavailable", op, stamp]:
                self.unavailable[op] += 1
                self.unavailable_times.append(float(stamp))
            case _:
                pass  # a line being written, or "stopped"

    def unaccounted(self) -> set[str]:
        """Produced items with no completion (sure or unsure) journaled."""
        return set(self.produced) - set(self.done) - self.unsure


def spawn_queue_proc(tmp_path: Path, name: str, *args: str) -> subprocess.Popen[bytes]:
    with (tmp_path / f"{name}.err").open("wb") as err:
        return subprocess.Popen(
            [sys.executable, str(PROC), *args], stdout=subprocess.DEVNULL, stderr=err
        )


def stop_procs(procs: list[subprocess.Popen[bytes]]) -> list[int | None]:
    """SIGTERM all, then reap each: its exit code, or None if it had to be killed."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    codes: list[int | None] = []
    for proc in procs:
        try:
            codes.append(proc.wait(timeout=max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            codes.append(None)
    return codes


class Starter(threading.Thread):
    """Starts ``live.loop`` runs at a steady pace until stopped; a start that
    raises Unavailable is sent again with the same idempotency key."""

    def __init__(self, q: Querator) -> None:
        super().__init__(name="starter", daemon=True)
        self.q = q
        self.runs: list[tuple[str, RunHandle[int]]] = []
        self.unavailable = 0
        self.unavailable_times: list[float] = []
        self.abandoned: list[str] = []
        self.error: BaseException | None = None
        self.halt = threading.Event()

    def run(self) -> None:
        try:
            self._start_runs()
        except BaseException as exc:
            self.error = exc

    def _start_runs(self) -> None:
        next_at = time.monotonic()
        n = 0
        while not self.halt.is_set():
            key = f"r{n}"
            pause = 0.05
            while True:
                try:
                    handle = start(self.q, live_flows.loop, key, STEPS, idempotency_key=key)
                    break
                except Unavailable:
                    self.unavailable += 1
                    self.unavailable_times.append(time.time())
                if self.halt.wait(pause):  # back off; stop when told to
                    self.abandoned.append(key)
                    return
                pause = min(pause * 2, 1.0)
            self.runs.append((key, handle))
            n += 1
            next_at = max(next_at + START_EVERY, time.monotonic() - START_EVERY)
            self.halt.wait(max(0.0, next_at - time.monotonic()))  # the pace of starts


class DoneClock(threading.Thread):
    """Notes when ``done`` lines appear in the step journal (every 0.1 s)."""

    def __init__(self, log: Path) -> None:
        super().__init__(name="done-clock", daemon=True)
        self.log = log
        self.times: list[float] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.1):
            done = sum(1 for verb, *_ in read_log(self.log) if verb == "done")
            now = time.time()
            self.times.extend([now] * (done - len(self.times)))


def run_result(
    handle: RunHandle[int], deadline: float, unavailable: Counter[str]
) -> tuple[Outcome, str]:
    """Wait for the run's result until the monotonic ``deadline``; Unavailable
    (a fault's aftermath on this client) is counted and the wait goes on."""
    pause = 0.1
    while (left := deadline - time.monotonic()) > 0:
        try:
            value = handle.result(timeout=min(left, 5.0))
        except RequestTimeout:
            continue
        except Unavailable:
            unavailable["result"] += 1
            time.sleep(min(pause, left))  # back off before asking again
            pause = min(pause * 2, 1.0)
            continue
        except WorkflowError as exc:
            return "failed", repr(exc)
        return ("ok" if value == EXPECTED else "wrong"), repr(value)
    return "unfinished", ""


def stop_workers(workers: list[WorkerProc]) -> list[int | None]:
    """SIGTERM all, then reap each: its exit code, or None if it had to be killed."""
    for worker in workers:
        if worker.proc.poll() is None:
            worker.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    codes: list[int | None] = []
    for worker in workers:
        try:
            codes.append(worker.proc.wait(timeout=max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            worker.kill()
            codes.append(None)
    return codes


def not_stored(run: RunHandle[int], unavailable: Counter[str]) -> bool:
    """Whether the database knows nothing of ``run`` (its start was lost)."""
    try:
        until_available(run.status, time.monotonic() + 30)
    except (InvalidArgument, RunNotFound):  # RunNotFound: no record of it at all
        return True
    except Unavailable:
        unavailable["status"] += 1
    return False
