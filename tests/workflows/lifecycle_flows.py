"""Workflows of the run-lifecycle tests: children spawned and gathered,
cancelled with their parent; runs that continue as new. Run in-process
(``run_worker``) and by worker processes (``lifecycle_worker.py``); steps log
``start``/``done`` lines through :func:`ops_flows.note`, so a test can count
how often each ran and where."""

from __future__ import annotations

import os
import time

from querator.workflows import (
    DurableFunction,
    ParentClosePolicy,
    StepFailed,
    continue_as_new,
    continue_as_new_async,
    deprecate_patch,
    gather,
    gather_async,
    patched,
    recv,
    step,
    workflow,
)

from .ops_flows import note


@step(name="kids.work", retry=None)
def work(key: str, n: int) -> int:
    """A logged step taking ``$KIDS_STEP_SECONDS`` (default: none); fails for n < 0."""
    note("start", key, n)
    seconds = float(os.environ.get("KIDS_STEP_SECONDS", "0"))
    if seconds:
        time.sleep(seconds)
    note("done", key, n)
    if n < 0:
        raise ValueError(f"negative {n}")
    return 10 * n


@workflow(name="kids.child")
def kid(key: str, n: int) -> int:
    """One step, plus one."""
    return work(key, n) + 1


@workflow(name="kids.brood")
def brood(key: str, n: int) -> list[int]:
    """``n`` children spawned and gathered."""
    return gather([kid.spawn(key, i) for i in range(n)])


@workflow(name="kids.mixed")
def mixed(key: str) -> list[int]:
    """Children and a step in one gather, then a plain child call."""
    both = gather([kid.spawn(key, 1), work.spawn(key, 2), kid.spawn(key, 3)])
    return [*both, kid(key, 4)]


@workflow(name="kids.akid")
async def akid(n: int) -> int:
    """An async child."""
    return n * 2


@workflow(name="kids.abrood")
async def abrood(n: int) -> list[int]:
    """Async children, gathered with ``gather_async``."""
    return await gather_async([akid.spawn(i) for i in range(n)])


@workflow(name="kids.catch")
def catch(key: str) -> str:
    """A failing child raises at gather, as a failing step would."""
    try:
        gather([kid.spawn(key, 1), kid.spawn(key, -1)])
    except StepFailed as exc:
        return f"{exc.step}@{exc.position}: {exc.error_type}"
    return "no failure"


@workflow(name="kids.waiter")
def waiter(key: str, n: int) -> str:
    """A child that waits for a message on topic ``go`` (parked, no step running)."""
    note("start", key, n)
    return str(recv("go"))


@workflow(name="kids.parent")
def parent(key: str, n: int, policy: ParentClosePolicy) -> list[str]:
    """``n`` waiting children under ``policy``, gathered."""
    child = waiter.with_options(parent_close_policy=policy)
    return gather([child.spawn(key, i) for i in range(n)])


@step(name="chain.tick", retry=None)
def tick(key: str, n: int) -> int:
    """A logged step taking ``$KIDS_STEP_SECONDS`` (default: none)."""
    note("start", key, n)
    seconds = float(os.environ.get("KIDS_STEP_SECONDS", "0"))
    if seconds:
        time.sleep(seconds)
    note("done", key, n)
    return n


@workflow(name="chain.count")
def count(key: str, left: int, total: int) -> int:
    """One step per run, then continue as new until ``left`` is 0: the sum of
    ``left .. 0``."""
    total += tick(key, left)
    if left == 0:
        return total
    continue_as_new(key, left - 1, total)


@workflow(name="chain.acount")
async def acount(left: int, total: int) -> int:
    """:func:`count` as an async body, without steps."""
    if left == 0:
        return total
    await continue_as_new_async(left - 1, total + left)


@workflow(name="chain.parent")
def chain_parent(n: int) -> int:
    """A child that continues as new: the parent gets its last run's result."""
    return count("child-chain", n, 0)


FLOWS: list[DurableFunction] = [work, kid, brood, mixed, akid, abrood, catch, waiter, parent]
FLOWS += [tick, count, acount, chain_parent]


# -- a workflow edited between deploys ($PRICING_CODE: v1, v2 patched, v3 deprecated) --


@step(name="pricing.old_price")
def old_price(key: str) -> str:
    """The old branch's step."""
    return f"v1:{key}"


@step(name="pricing.new_price")
def new_price(key: str) -> str:
    """The new branch's step (one more call than the old branch makes)."""
    return f"v2:{key}"


@step(name="pricing.tax")
def tax(price: str) -> str:
    """A step of the new branch only."""
    return price + "+tax"


@step(name="pricing.finish")
def finish(price: str, go: str) -> str:
    """The step after the patch point and a message."""
    return f"{price}/{go}"


@workflow(name="pricing.quote")
def quote(key: str, hold: bool) -> str:
    """``hold``: wait for a ``before`` message ahead of the patch point; then the
    price (v1: old branch, v2: ``patched``, v3: ``deprecate_patch``), a ``go``
    message, a last step."""
    if hold:
        recv("before")
    code = os.environ.get("PRICING_CODE", "v1")
    if code == "v3":
        deprecate_patch("new-pricing")
        price = tax(new_price(key))
    elif code == "v2" and patched("new-pricing"):
        price = tax(new_price(key))
    else:
        price = old_price(key)
    return finish(price, recv("go"))


FLOWS += [old_price, new_price, tax, finish, quote]
