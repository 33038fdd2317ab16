"""Item ids: only the canonical spelling querator writes is accepted."""

from __future__ import annotations

import pytest

from querator.queue.ids import ItemAddress, format_id, parse_id


@pytest.mark.parametrize(
    "text",
    ["01.2.3", "1.2.-3", "1.2.3 ", " 1.2.3", "1.2", "1.2.3.4", "1_0.2.3", "\u0661.2.3",
     "+1.2.3", "1.2.3\n", "", "9999999999999999999.0.1"],
)  # fmt: skip
def test_rejects_non_canonical_ids(text: str) -> None:
    assert parse_id(text) is None


@pytest.mark.parametrize("value", [5, None, b"1.2.3", 1.5])
def test_rejects_non_strings(value: object) -> None:
    assert parse_id(value) is None


@pytest.mark.parametrize("numbers", [(0, 0, 0), (7, 3, 123456), (10**17, 999, 10**18 - 1)])
def test_round_trip(numbers: tuple[int, int, int]) -> None:
    assert parse_id(format_id(*numbers)) == ItemAddress(*numbers)
