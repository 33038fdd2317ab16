"""A run's page in a real browser while the run goes on: steps appear as they
end (the workers' progress wakeups), published values and streams as they
arrive; on SQLite and PostgreSQL."""

from __future__ import annotations

from playwright.sync_api import Browser, expect
from polling import wait_for

from dashboard.demo_app import open_gate, two_gates
from dashboard.sites import Site
from querator.workflows import get_run, start

expect.set_options(timeout=20_000)


def test_a_run_page_shows_a_step_end_before_the_run_ends(site: Site, browser: Browser) -> None:
    first = site.scratch / f"first-{site.backend}"
    second = site.scratch / f"second-{site.backend}"
    run = site.do(start, site.q, two_gates, str(first), str(second))
    page = site.sign_in(browser, "read")
    page.goto(f"/ui/runs/{run.run_id}")
    expect(page.locator("h1 .badge")).to_have_text("running")
    expect(page.locator("p.empty")).to_have_text("No step has ended yet.")
    expect(page.locator("body")).to_have_attribute("data-live-state", "open")
    page.evaluate("window.notReloaded = true")

    open_gate(first, "one")
    steps = page.locator("table.steps tbody tr")
    expect(steps).to_have_count(1)
    expect(steps.first).to_contain_text('"one"')
    expect(page.locator("table.timeline tr[data-lane='0']")).to_have_class("completed")
    expect(page.locator("h1 .badge")).to_have_text("running")  # the second step still waits
    assert site.do(get_run, site.q, run.run_id).status == "running"

    open_gate(second, "two")
    wait_for(lambda: site.do(get_run, site.q, run.run_id).status == "completed", timeout=30)
    expect(page.locator("h1 .badge")).to_have_text("completed")
    expect(steps).to_have_count(2)
    assert page.evaluate("window.notReloaded") is True
    page.context.close()
