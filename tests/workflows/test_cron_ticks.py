"""Pure cron maths: validation, DST rule, catch-up and overlap decisions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from querator.errors import InvalidArgument
from querator.workflows.cron.schedules import (
    ScheduleSpec,
    ScheduleState,
    check_cron,
    check_tz,
    due_ticks,
    jitter_delay,
    next_tick,
    plan_overlap,
    prev_tick,
    tick_key,
    ticks_between,
)

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def ticks(cron: str, zone: ZoneInfo, start: datetime, end: datetime) -> list[datetime]:
    return ticks_between(cron, zone, start, end, 1000)


@pytest.mark.parametrize("cron", ["61 * * * *", "* * *", "a b c d e", "* * * * * * *", ""])
def test_cron_invalid_expressions_name_the_field(cron: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        check_cron(cron)
    assert info.value.field == "cron"


def test_cron_valid_expressions_and_seconds_field() -> None:
    assert check_cron("*/5 * * * *") == "*/5 * * * *"
    check_cron("*/2 * * * * *")  # six fields: seconds first
    start = utc(2026, 1, 1)
    assert ticks("*/20 * * * * *", ZoneInfo("UTC"), start, start + timedelta(minutes=1)) == [
        start + timedelta(seconds=s) for s in (20, 40, 60)
    ]


def test_cron_unknown_time_zone_names_the_field() -> None:
    for tz in ("Mars/Olympus", "", "../etc"):
        with pytest.raises(InvalidArgument) as info:
            check_tz(tz)
        assert info.value.field == "tz"
    assert check_tz("Europe/Berlin") == BERLIN


def test_cron_spring_forward_nonexistent_time_runs_once_at_gap_end() -> None:
    # Europe/Berlin 2026-03-29: 02:00 CET jumps to 03:00 CEST (01:00 UTC).
    got = ticks("30 2 * * *", BERLIN, utc(2026, 3, 27), utc(2026, 3, 31))
    assert got == [
        utc(2026, 3, 27, 1, 30),
        utc(2026, 3, 28, 1, 30),
        utc(2026, 3, 29, 1),
        utc(2026, 3, 30, 0, 30),
    ]


def test_cron_spring_forward_hourly_fires_once_at_three() -> None:
    got = ticks("0 * * * *", BERLIN, utc(2026, 3, 28, 23), utc(2026, 3, 29, 3))
    # local 01:00 CET, then 02:00 (missing) and 03:00 CEST are the same instant: once.
    assert got == [
        utc(2026, 3, 29, 0),
        utc(2026, 3, 29, 1),
        utc(2026, 3, 29, 2),
        utc(2026, 3, 29, 3),
    ]


def test_cron_fall_back_ambiguous_time_runs_once_at_first_occurrence() -> None:
    # Europe/Berlin 2026-10-25: 03:00 CEST goes back to 02:00 CET (01:00 UTC).
    got = ticks("30 2 * * *", BERLIN, utc(2026, 10, 24), utc(2026, 10, 27))
    assert got == [utc(2026, 10, 24, 0, 30), utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]


def test_cron_fall_back_hourly_skips_the_repeated_hour() -> None:
    got = ticks("0 * * * *", BERLIN, utc(2026, 10, 24, 22), utc(2026, 10, 25, 3))
    # 02:00 local happens at 00:00 UTC (CEST) and 01:00 UTC (CET): only the first.
    assert got == [
        utc(2026, 10, 24, 23),
        utc(2026, 10, 25, 0),
        utc(2026, 10, 25, 2),
        utc(2026, 10, 25, 3),
    ]


def test_cron_new_york_transitions() -> None:
    # 2026-03-08: 02:00 EST -> 03:00 EDT (07:00 UTC); three ticks in the gap collapse.
    got = ticks("*/20 2 * * *", NEW_YORK, utc(2026, 3, 7, 12), utc(2026, 3, 8, 12))
    assert got == [utc(2026, 3, 8, 7)]
    # 2026-11-01: 02:00 EDT -> 01:00 EST (06:00 UTC); 01:30 occurs twice, fires once.
    got = ticks("30 1 * * *", NEW_YORK, utc(2026, 10, 31, 12), utc(2026, 11, 2, 12))
    assert got == [utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]


def test_cron_next_and_prev_inside_the_repeated_hour() -> None:
    second_half = utc(2026, 10, 25, 1, 30)  # 02:30 CET, the second occurrence
    assert next_tick("0 * * * *", BERLIN, second_half) == utc(2026, 10, 25, 2)
    assert prev_tick("0 * * * *", BERLIN, second_half) == utc(2026, 10, 25, 0)
    assert prev_tick("30 2 * * *", BERLIN, utc(2026, 3, 29, 1, 30)) == utc(2026, 3, 29, 1)
    assert next_tick("30 2 * * *", BERLIN, utc(2026, 10, 25, 0, 30)) == utc(2026, 10, 26, 1, 30)


def state(catchup: str = "skip", last: datetime | None = None, **spec: object) -> ScheduleState:
    base = ScheduleSpec.model_validate(
        {
            "name": "s",
            "workflow": "w",
            "queue": "q",
            "cron": "0 * * * *",
            "catchup": catchup,
            **spec,
        }
    )
    return ScheduleState(spec=base, start_at=utc(2026, 1, 1), last_tick=last)


def test_cron_catchup_on_time_tick_fires_under_every_policy() -> None:
    for policy in ("skip", "latest", "all"):
        got, last = due_ticks(state(policy, utc(2026, 1, 1, 9)), utc(2026, 1, 1, 10, 0, 30))
        assert got == [utc(2026, 1, 1, 10)] and last == utc(2026, 1, 1, 10)


def test_cron_catchup_after_downtime() -> None:
    last, now = utc(2026, 1, 1, 9), utc(2026, 1, 1, 13, 20)  # ticks 10, 11, 12, 13 missed
    assert due_ticks(state("skip", last), now) == ([], utc(2026, 1, 1, 13))
    assert due_ticks(state("latest", last), now) == ([utc(2026, 1, 1, 13)], utc(2026, 1, 1, 13))
    every = [utc(2026, 1, 1, h) for h in (10, 11, 12, 13)]
    assert due_ticks(state("all", last), now) == (every, utc(2026, 1, 1, 13))
    # "all" is bounded by the catch-up window.
    got, _ = due_ticks(state("all", last, catchup_window=7200.0), now)
    assert got == [utc(2026, 1, 1, 12), utc(2026, 1, 1, 13)]
    # Nothing new: nothing to do.
    assert due_ticks(state("all", utc(2026, 1, 1, 13)), now) == ([], utc(2026, 1, 1, 13))


def test_cron_catchup_starts_after_start_at() -> None:
    fresh = state("all")  # start_at 2026-01-01 00:00: that tick counts
    got, _ = due_ticks(fresh, utc(2026, 1, 1, 2, 0, 1))
    assert got == [utc(2026, 1, 1, 0), utc(2026, 1, 1, 1), utc(2026, 1, 1, 2)]


T1, T2, T3 = utc(2026, 1, 1, 1), utc(2026, 1, 1, 2), utc(2026, 1, 1, 3)


@pytest.mark.parametrize(
    ("policy", "running", "start", "buffered", "cancel"),
    [
        ("skip", False, (T1,), (), False),
        ("skip", True, (), (), False),
        ("allow_all", True, (T1, T2), (), False),
        ("buffer_one", True, (), (T1,), False),
        ("buffer_one", False, (T1,), (T2,), False),
        ("buffer_all", True, (), (T1, T2), False),
        ("buffer_all", False, (T1,), (T2,), False),
        ("cancel_other", True, (), (T2,), True),
        ("cancel_other", False, (T2,), (), False),
        ("terminate_other", True, (T2,), (), True),
    ],
)
def test_cron_overlap_policies(
    policy: str,
    running: bool,
    start: tuple[datetime, ...],
    buffered: tuple[datetime, ...],
    cancel: bool,
) -> None:
    plan = plan_overlap(policy, [T1, T2], (), running)  # type: ignore[arg-type]
    assert (plan.start, plan.buffered, plan.cancel_previous) == (start, buffered, cancel)


def test_cron_overlap_buffered_ticks_release_in_order() -> None:
    plan = plan_overlap("buffer_all", [T3], (T1, T2), running=False)
    assert plan.start == (T1,) and plan.buffered == (T2, T3)
    plan = plan_overlap("buffer_one", [T3], (T1,), running=True)
    assert plan.buffered == (T1,) and plan.skipped == (T3,)
    plan = plan_overlap("cancel_other", [], (T2,), running=True)
    assert plan.start == () and plan.buffered == (T2,) and not plan.cancel_previous


def test_cron_jitter_is_deterministic_and_keeps_the_key() -> None:
    a = jitter_delay("s", T1, 30.0)
    assert a == jitter_delay("s", T1, 30.0) and 0 <= a < 30
    assert jitter_delay("s", T1, 0.0) == 0.0
    assert tick_key("s", T1) == "schedule:s:2026-01-01T01:00:00+00:00"
    assert tick_key("s", T1.astimezone(BERLIN)) == tick_key("s", T1)
