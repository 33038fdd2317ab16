"""Workflows whose steps have concurrency limits, for the limit tests' workers.

Each held step appends ``enter <ns> <key> <pid>`` and ``exit <ns> <key> <pid>``
(``time.monotonic_ns()``: one clock for every process of the machine) to the
file named by ``$LIMITS_LOG``.
"""

from __future__ import annotations

import os
import random
import time

from querator.limits import Concurrency
from querator.workflows import gather, step, workflow

LIMIT = 2
LEASE = 1.0


def _stamp(what: str, key: str) -> None:
    with open(os.environ["LIMITS_LOG"], "a", buffering=1) as out:
        out.write(f"{what} {time.monotonic_ns()} {key} {os.getpid()}\n")


@step(
    name="limits.hold",
    concurrency=Concurrency(LIMIT, key=lambda tenant, i: tenant, lease=LEASE),
)
def hold(tenant: str, i: int) -> int:
    _stamp("enter", tenant)
    time.sleep(random.uniform(0.03, 0.12))  # the limited work
    _stamp("exit", tenant)
    return i


@step(name="limits.hold_shared", concurrency=Concurrency(1, name="shared-api", lease=LEASE))
def hold_shared(i: int) -> int:
    _stamp("enter", "shared")
    time.sleep(0.01)
    _stamp("exit", "shared")
    return i


@step(name="limits.also_shared", concurrency=Concurrency(1, name="shared-api", lease=LEASE))
def also_shared(i: int) -> int:
    _stamp("enter", "shared")
    time.sleep(0.01)
    _stamp("exit", "shared")
    return -i


@workflow(name="limits.burst")
def burst(tenant: str, n: int) -> list[int]:
    return gather([hold.spawn(tenant, i) for i in range(n)])


@workflow(name="limits.shared")
def shared(n: int) -> list[int]:
    handles = [hold_shared.spawn(i) for i in range(n)] + [also_shared.spawn(i) for i in range(n)]
    return gather(handles)
