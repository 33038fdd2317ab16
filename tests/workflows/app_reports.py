"""App B of the routing tests: workflows on their own queue (``ux2``), steps
without a queue, so its workers also lease from the default queue that app A
(:mod:`.app_pipeline`) uses. B must never lease, fail or touch A's items."""

from __future__ import annotations

from querator.workflows import saga, step, workflow


@step(name="ux2.collect")
def collect(n: int) -> int:
    return n + 10


@step(name="ux2.hold")
def hold(n: int) -> str:
    return f"h{n}"


@hold.compensate
def unhold(n: int, held: str) -> None:
    return None


@workflow(name="ux2.report", queue="ux2")
def report(n: int) -> int:
    return collect(n)


@saga(name="ux2.trip", queue="ux2")
def trip(n: int) -> str:
    return hold(n)
