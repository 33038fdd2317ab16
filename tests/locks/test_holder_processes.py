"""Proofs with real processes: never more than N holders, with SIGKILLs; a
killed holder's permit comes back after its lease; a late write of a holder
that lost its permit is refused by a store that checks fencing tokens."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from subprocess import Popen

from polling import wait_for

from locks.fenced import FencedStore
from querator import Querator
from querator.locks import Semaphore

HOLDER = Path(__file__).with_name("holder.py")
TESTS = str(Path(__file__).parent.parent)
LEASE = 1.0


def spawn(
    mode: str, url: str, name: str, limit: int, log: Path, store: Path
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": TESTS}
    args = [mode, url, name, str(limit), str(LEASE), str(log), str(store)]
    return subprocess.Popen([sys.executable, str(HOLDER), *args], env=env)


def lines(log: Path) -> list[list[str]]:
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []


def most_at_once(events: list[tuple[int, int]]) -> int:
    """The largest number of open intervals at any instant (+1 enter, -1 exit;
    an exit at the same instant as an enter counts first)."""
    most = inside = 0
    for _, step in sorted(events, key=lambda event: (event[0], event[1])):
        inside += step
        most = max(most, inside)
    return most


def test_never_more_than_n_holders_with_kills(shared_url: str, tmp_path: Path) -> None:
    rng = random.Random(31)
    logs = [tmp_path / f"holder-{n}.log" for n in range(3)]
    store = tmp_path / "fenced.db"
    FencedStore(store).close()
    with Querator(shared_url) as q:
        Semaphore(q, "pool", 2)  # created before the holders start
    procs = [spawn("loop", shared_url, "pool", 2, log, store) for log in logs]
    killed: dict[int, int] = {}  # pid -> instant it was certainly dead
    try:
        wait_for(lambda: all(lines(log) for log in logs), timeout=30, message="all holders in")
        for _ in range(5):
            time.sleep(rng.uniform(0.3, 0.8))  # pacing of the chaos, not a wait
            victim = rng.randrange(len(procs))
            procs[victim].send_signal(signal.SIGKILL)
            procs[victim].wait()
            killed[procs[victim].pid] = time.monotonic_ns()
            procs[victim] = spawn("loop", shared_url, "pool", 2, logs[victim], store)
        entered_after_kills = sum(len(lines(log)) for log in logs) + 20
        wait_for(
            lambda: sum(len(lines(log)) for log in logs) >= entered_after_kills,
            timeout=30,
            message="holders go on after the kills",
        )
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    ended = time.monotonic_ns()
    events: list[tuple[int, int]] = []
    tokens: dict[str, list[int]] = {}
    open_at: dict[tuple[str, str], int] = {}
    records = sorted(
        (int(at), verb, pid, permit, int(token))
        for log in logs
        for verb, at, pid, permit, token in lines(log)
    )
    for at, verb, pid, permit, token in records:
        if verb == "enter":
            open_at[(pid, permit)] = at
            tokens.setdefault(permit, []).append(token)
            events.append((at, +1))
        else:
            del open_at[(pid, permit)]
            events.append((at, -1))
    for (pid, _), _at in open_at.items():  # killed (or stopped) inside: out at its death
        events.append((killed.get(int(pid), ended), -1))
    assert most_at_once(events) == 2, "two holders at once, never three"
    for permit, seen in tokens.items():
        assert seen == sorted(set(seen)), f"permit {permit}: tokens grow with each holder"
    print(f"{len(records) // 2} holds by 3 processes, 5 SIGKILLs, at most 2 at once")


@contextmanager
def holding(url: str, name: str, log: Path, store: Path) -> Iterator[tuple[Popen[bytes], int]]:
    """A ``hold`` holder process of lock ``name``, once it holds: (process, token)."""
    holder = spawn("hold", url, name, 1, log, store)
    try:
        line = wait_for(lambda: lines(log), timeout=30, message=f"the holder of {name} holds")
        yield holder, int(line[0][1])
    finally:
        holder.kill()
        holder.wait()


def test_a_killed_holders_permit_comes_back_and_its_late_write_is_refused(
    shared_url: str, tmp_path: Path
) -> None:
    store = FencedStore(tmp_path / "fenced.db")
    log = tmp_path / "killed.log"
    with holding(shared_url, "guard", log, tmp_path / "fenced.db") as (holder, dead_token):
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        killed_at = time.monotonic()
        with Querator(shared_url) as q:
            lock = Semaphore(q, "guard", 1, lease=LEASE)
            with lock.acquire(timeout=30) as permit:
                waited = time.monotonic() - killed_at
                assert permit.token > dead_token
                assert store.write("guarded", permit.token, "second")
    # the dead holder's write, arriving late (a packet in flight): refused
    assert not store.write("guarded", dead_token, "late")
    assert store.read("guarded") == (permit.token, "second")
    # it came back when the lease lapsed: neither at once nor never
    assert LEASE / 3 < waited < LEASE + 10
    store.close()


def test_a_paused_holder_learns_its_permit_was_lost(shared_url: str, tmp_path: Path) -> None:
    store = FencedStore(tmp_path / "fenced.db")
    log = tmp_path / "paused.log"
    with holding(shared_url, "paused", log, tmp_path / "fenced.db") as (holder, paused_token):
        holder.send_signal(signal.SIGSTOP)  # a long GC pause, a frozen VM
        with Querator(shared_url) as q:
            lock = Semaphore(q, "paused", 1, lease=LEASE)
            with lock.acquire(timeout=30) as permit:
                assert permit.token > paused_token
                assert store.write("guarded", permit.token, "new holder")
        Path(f"{log}.go").touch()
        holder.send_signal(signal.SIGCONT)
        assert holder.wait(30) == 0
    assert [" ".join(words) for words in lines(log)[1:]] == [
        "lost True",
        "write False",
        "release LockLost",
    ]
    assert store.read("guarded") == (permit.token, "new holder")
    store.close()
