"""A lock holder process for the lock tests.

Usage: python holder.py MODE URL NAME LIMIT LEASE LOG STORE

- ``loop``: forever acquire a permit, append ``enter <ns> <pid> <permit> <token>``
  to LOG, write to the fenced STORE, hold a few milliseconds, append
  ``exit <ns> ...``, release. Instants are ``time.monotonic_ns()`` (one clock
  for every process of the machine).
- ``hold``: acquire, write to STORE, append ``held <token>``; then wait for the
  file ``LOG.go`` and, once it exists, write ``late`` to STORE and append
  ``lost <permit.lost>``, ``write <accepted>`` and ``release <outcome>``.
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

from locks.fenced import FencedStore
from querator import Querator
from querator.errors import LockLost
from querator.locks import Semaphore


def loop(sem: Semaphore, log: Path, store: FencedStore) -> None:
    pid = os.getpid()
    with log.open("a", buffering=1) as out:
        while True:
            with sem.acquire() as permit:
                stamp = f"{pid} {permit.index} {permit.token}"
                out.write(f"enter {time.monotonic_ns()} {stamp}\n")
                store.write(f"permit-{permit.index}", permit.token, str(pid))
                time.sleep(random.uniform(0.005, 0.04))  # the critical section's work
                out.write(f"exit {time.monotonic_ns()} {stamp}\n")


def hold(sem: Semaphore, log: Path, store: FencedStore) -> None:
    go = Path(f"{log}.go")
    with log.open("a", buffering=1) as out:
        permit = sem.acquire_permit(timeout=30)
        store.write("guarded", permit.token, "first")
        out.write(f"held {permit.token}\n")
        while not go.exists():
            time.sleep(0.01)
        out.write(f"lost {permit.lost}\n")
        out.write(f"write {store.write('guarded', permit.token, 'late')}\n")
        try:
            sem.release(permit)
            out.write("release ok\n")
        except LockLost:
            out.write("release LockLost\n")


def main() -> None:
    mode, url, name, limit, lease, log, store_path = sys.argv[1:8]
    store = FencedStore(Path(store_path))
    with Querator(url) as q:
        sem = Semaphore(q, name, int(limit), lease=float(lease))
        (loop if mode == "loop" else hold)(sem, Path(log), store)


if __name__ == "__main__":
    main()
