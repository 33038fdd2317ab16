"""App A of the routing tests: a workflow and a saga on the default queue.

Served by its own workers (``querator worker workflows.app_pipeline``); app B
(:mod:`.app_reports`) shares the store and the default queue with it.
"""

from __future__ import annotations

from querator.workflows import saga, step, workflow


@step(name="ux.fetch")
def fetch(n: int) -> int:
    return n + 1


@step(name="ux.transform")
def transform(n: int) -> int:
    return n * 2


@workflow(name="ux.pipeline")
def pipeline(n: int) -> int:
    return transform(fetch(n))


@step(name="ux.reserve")
def reserve(n: int) -> str:
    return f"r{n}"


@reserve.compensate
def release(n: int, reservation: str) -> None:
    return None


@saga(name="ux.booking")
def booking(n: int) -> str:
    return reserve(n) + "-" + str(fetch(n))
