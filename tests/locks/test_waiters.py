"""Waiters: recorded and listed, served in arrival order, each release waking one."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from polling import wait_for

from querator import Querator
from querator.locks import Semaphore, list_semaphores
from querator.locks.waiters import Waiter


def _waiters(q: Querator, name: str) -> list[Waiter]:
    [info] = [info for info in list_semaphores(q) if info.name == name]
    return info.waiters


def _wait_count(q: Querator, name: str, count: int) -> None:
    wait_for(lambda: len(_waiters(q, name)) == count, 30, message=f"{count} waiting")


def test_waiters_are_listed_and_served_in_arrival_order(q: Querator) -> None:
    sem = Semaphore(q, "fifo", 1, client_id="holder")
    held = sem.acquire_permit(0)
    order: list[str] = []
    guard = threading.Lock()
    threads = []
    for number in range(3):
        waiter = Semaphore(q, "fifo", 1, client_id=f"waiter-{number}")

        def wait(waiter: Semaphore = waiter) -> None:
            with waiter.acquire(timeout=30), guard:
                order.append(waiter.client_id)

        thread = threading.Thread(target=wait)
        thread.start()
        threads.append(thread)
        _wait_count(q, "fifo", number + 1)
    listed = _waiters(q, "fifo")
    assert [waiter.client_id for waiter in listed] == ["waiter-0", "waiter-1", "waiter-2"]
    assert all(waiter.since is not None for waiter in listed)
    sem.release(held)
    for thread in threads:
        thread.join(30)
    assert order == ["waiter-0", "waiter-1", "waiter-2"]  # a herd would serve them at random
    assert _waiters(q, "fifo") == []


def test_a_release_wakes_one_waiter_per_freed_permit(q: Querator) -> None:
    sem = Semaphore(q, "one-each", 2, client_id="holder")
    first, second = sem.acquire_permit(0), sem.acquire_permit(0)
    got: list[int] = []
    events = [threading.Event() for _ in range(3)]
    threads = []
    for number in range(3):

        def wait(number: int = number) -> None:
            waiter = Semaphore(q, "one-each", 2, client_id=f"w{number}")
            permit = waiter.acquire_permit(timeout=30)
            got.append(number)
            events[number].wait(30)
            waiter.release(permit)

        threads.append(threading.Thread(target=wait))
        threads[-1].start()
        _wait_count(q, "one-each", number + 1)
    sem.release(first)
    wait_for(lambda: got == [0], 10, message="the oldest waiter took the freed permit")
    assert [w.client_id for w in _waiters(q, "one-each")] == ["w1", "w2"]
    sem.release(second)
    wait_for(lambda: got == [0, 1], 10, message="the next one took the next permit")
    assert [w.client_id for w in _waiters(q, "one-each")] == ["w2"]
    events[0].set()
    wait_for(lambda: got == [0, 1, 2], 10, message="the last one")
    for event in events:
        event.set()
    for thread in threads:
        thread.join(30)


WAITER = """
import sys
from querator import Querator
from querator.locks import Semaphore
with Querator(sys.argv[1]) as q:
    Semaphore(q, "gone", 1, lease=0.5, client_id="doomed").acquire_permit(timeout=60)
"""


def test_a_killed_waiter_stops_counting(shared_url: str, tmp_path: Path) -> None:
    with Querator(shared_url) as q:
        sem = Semaphore(q, "gone", 1, lease=0.5, client_id="holder")
        held = sem.acquire_permit(0)
        proc = subprocess.Popen([sys.executable, "-c", WAITER, shared_url])
        try:
            wait_for(lambda: _waiters(q, "gone"), 60, message="the child waits")
        finally:
            proc.kill()
            proc.wait(10)
        wait_for(lambda: not _waiters(q, "gone"), 10, message="its record lapsed")
        sem.release(held)
        with sem.acquire(timeout=5) as permit:  # nobody chosen in vain
            assert not permit.lost
