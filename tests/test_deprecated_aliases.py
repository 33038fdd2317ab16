"""Renamed public names keep a deprecated alias for one minor version: it warns
and does what the new name does."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from datetime import UTC, datetime

import anyio
import pytest

from querator.clock import Clock, ManualClock
from querator.errors import UsageError
from querator.workflows import (
    agather,
    areport_progress,
    asleep,
    asleep_until,
    gather_async,
    report_progress_async,
    sleep_async,
    sleep_until_async,
)


def test_clock_given_is_store_now() -> None:
    clock = ManualClock()
    with pytest.warns(DeprecationWarning, match="use Clock.store_now"):
        assert clock.given() == clock.store_now() == clock.now()


def test_a_clock_written_for_the_old_name_still_works() -> None:
    with pytest.warns(DeprecationWarning, match="name it store_now"):

        class Old(Clock):
            def now(self) -> datetime:
                return datetime(2026, 1, 1, tzinfo=UTC)

            def given(self) -> datetime:
                return self.now()

            def on_advance(self, wake: Callable[[], None]) -> Callable[[], None]:
                return lambda: None

    old = Old()  # type: ignore[abstract]
    assert old.store_now() == datetime(2026, 1, 1, tzinfo=UTC)


def test_the_async_twins_old_names_warn_and_delegate() -> None:
    async def main() -> None:
        with pytest.warns(DeprecationWarning, match="use sleep_async"):
            await asleep(0)
        with pytest.warns(DeprecationWarning, match="use sleep_until_async"):
            await asleep_until(datetime.now(UTC))
        with pytest.warns(DeprecationWarning, match="use gather_async"):
            assert await agather([]) == []
        warned = pytest.warns(DeprecationWarning, match="use report_progress_async")
        with warned, pytest.raises(UsageError):  # outside a step, as the new name
            await areport_progress({"done": 1})

    anyio.run(main)


def test_the_new_names_do_not_warn() -> None:
    async def main() -> None:
        await sleep_async(0)
        await sleep_until_async(datetime.now(UTC))
        assert await gather_async([]) == []
        with pytest.raises(UsageError):
            await report_progress_async({"done": 1})

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        anyio.run(main)
