"""Measurements: what one scenario case gave for one system, over repetitions."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from benchmarks.stats import median

Better = Literal["higher", "lower"]


@dataclass(slots=True)
class Measurement:
    """One cell of the results table: a metric of one system in one case."""

    scenario: str
    case: str
    system: str
    metric: str
    """What was measured, with its unit (``items/s``, ``ms p50`` …)."""
    better: Better
    values: list[float]
    """One value per timed repetition."""
    detail: dict[str, Any] = field(default_factory=dict)
    """Sizes and anything else needed to read the figure (items per repetition …)."""

    @property
    def value(self) -> float:
        """The median over repetitions."""
        return median(self.values)

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready dict (with the median)."""
        data = asdict(self)
        data["value"] = self.value
        return data


def advantage(mine: float, theirs: float, better: Better) -> float:
    """How many times better ``mine`` is than ``theirs`` (>1: mine is better)."""
    if better == "higher":
        return mine / theirs if theirs else float("inf")
    return theirs / mine if mine else float("inf")
