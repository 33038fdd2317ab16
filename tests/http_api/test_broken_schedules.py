"""A stored schedule that cannot fire (written by hand, or before its cron was
checked) never breaks listing, over HTTP and in the CLI; a cron that never
fires is refused at creation."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import httpx
from cli_forks import run_cli
from http_server import serve

from querator import Querator
from querator.workflows.cron.schedules import ScheduleSpec, ScheduleState
from querator.workflows.cron.store import write

from . import http_flows

ROOT = Path(__file__).resolve().parents[2]


def test_a_broken_schedule_is_listed_as_broken(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'q.db'}"
    with Querator(url) as q:
        spec = ScheduleSpec(name="feb30", workflow="http.greet", queue="q", cron="0 0 30 2 *")
        state = ScheduleState(spec=spec, start_at=datetime(2026, 1, 1, tzinfo=UTC))
        assert q.call(write, q.aio, None, state)
    with serve(url, "--app", http_flows.__file__) as base, httpx.Client(base_url=base) as http:
        created = http.post(
            "/v1/schedules.create",
            json={"name": "ok", "workflow": "http.greet", "cron": "0 3 * * *", "args": ["x"]},
        )
        assert created.status_code == 200, created.text
        refused = http.post(
            "/v1/schedules.create",
            json={"name": "feb", "workflow": "http.greet", "cron": "0 0 30 2 *", "args": ["x"]},
        )
        assert refused.status_code == 400 and "cron" in refused.json()["message"]
        listed = http.post("/v1/schedules.list", json={})
        assert listed.status_code == 200, listed.text
        by_name = {s["name"]: s for s in listed.json()["schedules"]}
    assert sorted(by_name) == ["feb30", "ok"]
    assert "never fires" in by_name["feb30"]["broken"] and by_name["ok"]["broken"] is None
    done = run_cli("schedules", "list", "--url", url, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    [line] = [ln for ln in done.stdout.splitlines() if ln.startswith("feb30")]
    assert "BROKEN" in line
    assert done.stderr.startswith("BROKEN feb30: invalid cron: '0 0 30 2 *' never fires")
    assert "Traceback" not in done.stderr
