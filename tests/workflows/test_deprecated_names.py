"""Public names renamed after the first release keep working, with a
DeprecationWarning, for one minor version (see CHANGELOG.md)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from querator import Querator
from querator.errors import InvalidArgument
from querator.workflows import start
from querator.workflows.cron.api import get_schedule, schedule
from querator.workflows.cron.scheduler import AsyncScheduler, Scheduler
from querator.workflows.inspection import list_runs

from .cron_flows import plain, record


def test_list_runs_name_is_the_old_name_of_workflow(q: Querator) -> None:
    mine = start(q, plain)
    start(q, record, "x", tick=datetime(2026, 1, 1, tzinfo=UTC))
    with pytest.warns(DeprecationWarning, match=r"list_runs\(workflow=\.\.\.\)") as told:
        runs = list_runs(q, name="cron.plain")
    assert [r.run_id for r in runs] == [mine.run_id]
    assert told[0].filename == __file__  # points at the caller
    with pytest.warns(DeprecationWarning), pytest.raises(InvalidArgument) as info:
        list_runs(q, name="cron.plain", workflow="cron.record")
    assert info.value.field == "name"


def test_scheduler_now_is_the_old_way_to_set_its_time(q: Querator) -> None:
    start_at = datetime(2030, 1, 1, tzinfo=UTC)
    schedule(q, "later", plain, cron="0 * * * *", start_at=start_at)
    with pytest.warns(DeprecationWarning, match="clock") as told:
        scheduler = Scheduler(q, now=lambda: start_at)
    assert told[0].filename == __file__
    assert len(scheduler.run_once()) == 1  # the 2030 tick, on the given time
    assert get_schedule(q, "later").last_tick == start_at
    with pytest.warns(DeprecationWarning, match="clock") as told:
        AsyncScheduler(q.aio, now=lambda: start_at)
    assert told[0].filename == __file__
