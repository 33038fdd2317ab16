"""Page times at growing store sizes: what ``run_listing`` and ``attribute_search`` share.

Each times a few kinds of ``list_runs`` pages at each size of a profile's list
(:func:`median_ms`), then reports every kind's time at each size and how much
it grew from the smallest size to the largest (:func:`add_page_rows`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.context import Bench
from benchmarks.results import Measurement
from benchmarks.systems import QUERATOR

LOOKS = 15
"""Calls timed per page kind and size (the median is reported)."""


def median_ms(call: Callable[[], Any]) -> float:
    """The median of :data:`LOOKS` calls of ``call``, in milliseconds."""
    times = []
    for _ in range(LOOKS):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000


def add_page_rows(
    bench: Bench, scenario: str, sizes: Sequence[int], page: int, rows: dict[str, list[float]]
) -> None:
    """Report ``rows`` (milliseconds by page kind, one per size): each time, and
    each kind's time at the largest size over its time at the smallest."""
    detail: dict[str, Any] = {"sizes": list(sizes), "page": page, "looks": LOOKS}
    for kind, values in rows.items():
        detail[f"ms_{kind}"] = [round(v, 3) for v in values]
    for kind, values in rows.items():
        for size, value in zip(sizes, values, strict=True):
            case = f"list_runs page ({kind}), {size:,} runs stored"
            bench.add(Measurement(scenario, case, QUERATOR.name, "ms", "lower", [value], detail))
        growth = values[-1] / values[0] if values[0] else float("nan")
        case = f"list_runs page ({kind}): time at {sizes[-1]:,} / at {sizes[0]:,} runs"
        bench.add(Measurement(scenario, case, QUERATOR.name, "ratio", "lower", [growth], detail))
