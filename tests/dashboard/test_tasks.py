"""Background tasks on the dashboard in a real browser (Debian's Chromium), on
SQLite and PostgreSQL: tasks listed by state and name, a failed task's page
with its error, retry of a failed task, cancel of one not started, and a
read-only token that sees no action and cannot post one."""

from __future__ import annotations

from playwright.sync_api import Browser, expect
from polling import wait_for

from dashboard.demo_app import sync_crm
from dashboard.sites import Site, reloaded, shot
from querator.tasks import list_tasks
from querator.tasks.handles import stored_outcome
from querator.tasks.layout import TaskRecord

expect.set_options(timeout=20_000)


def _failed_ids(site: Site) -> set[str]:
    return {info.id for info in site.do(list_tasks, site.q, failed=True, name=sync_crm.name)}


def test_tasks_are_listed_retried_and_cancelled(site: Site, browser: Browser) -> None:
    consent = site.scratch / f"consent-{site.backend}"
    customer = f"<b>ada-{site.backend}</b>"
    failing = site.do(sync_crm.defer, site.q, customer, str(consent))
    later = site.do(sync_crm.defer, site.q, "grace", str(consent), delay=3600)
    dead = wait_for(lambda: _failed_ids(site), timeout=60, message="the task failed")
    (dead_id,) = dead

    page = site.sign_in(browser, "write")
    page.goto("/ui/tasks")
    row = page.locator(f"tr[data-task='{later.id}']")
    expect(row).to_contain_text("scheduled")
    expect(row).to_contain_text("demo.sync_crm")
    expect(page.locator("[data-count='demo.sync_crm']")).to_be_visible()
    shot(site, page, "tasks")

    page.on("dialog", lambda dialog: dialog.accept())
    with reloaded(page):
        row.locator("button[data-action=Cancel]").click()
    expect(page.locator(f"tr[data-task='{later.id}']")).to_have_count(0)
    waiting = site.do(list_tasks, site.q, name=sync_crm.name)
    assert later.id not in {info.id for info in waiting}

    page.select_option("select[name=state]", "failed")
    page.click("form.filters button")
    failed_row = page.locator(f"tr[data-task='{dead_id}']")
    expect(failed_row).to_contain_text("PermissionError")
    failed_row.locator(f"a[href^='/ui/tasks/{dead_id}']").click()
    expect(page.locator("#error")).to_contain_text(f"no consent from {customer} yet")
    expect(page.locator("#error")).to_contain_text("Traceback")
    expect(page.locator("#args")).to_contain_text(customer)  # a user string, as text
    expect(page.locator("#outcome-error")).to_contain_text("PermissionError")
    expect(page.locator("#attempts")).to_have_text("1")
    shot(site, page, "task")

    consent.write_text("yes")
    with reloaded(page):
        page.click("button[data-action=Retry]")
    expect(page.locator(f"tr[data-task='{dead_id}']")).to_have_count(0)

    def synced() -> bool:
        outcome = site.off_loop(_outcome, site, failing.task_id)
        return outcome is not None and outcome.ok

    wait_for(synced, timeout=60, message="the retried task ran and kept its result")
    assert dead_id not in _failed_ids(site)
    page.context.close()


def _outcome(site: Site, task_id: str) -> TaskRecord | None:
    return site.q.call(stored_outcome, site.q.aio, task_id)


def test_a_read_only_token_cannot_retry_or_cancel_a_task(site: Site, browser: Browser) -> None:
    consent = site.scratch / f"never-{site.backend}"
    later = site.do(sync_crm.defer, site.q, "read-only", str(consent), delay=3600)
    page = site.sign_in(browser, "read")
    page.goto("/ui/tasks")
    expect(page.locator(f"tr[data-task='{later.id}']")).to_contain_text("scheduled")
    expect(page.locator("button[data-action]")).to_have_count(0)
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "querator_csrf")
    answer = page.request.post(
        "/ui/tasks/cancel?queue=querator.tasks",
        form={"csrf": csrf, "id": later.id},
        headers={"origin": site.url},
    )
    assert answer.status == 403
    waiting = site.do(list_tasks, site.q, name=sync_crm.name)
    assert later.id in {info.id for info in waiting}
    page.context.close()


def test_a_failed_task_shows_up_without_reload(site: Site, browser: Browser) -> None:
    page = site.sign_in(browser, "read")
    page.goto("/ui/tasks?state=failed")
    expect(page.locator("body")).to_have_attribute("data-live-state", "open")
    customer = f"live-{site.backend}"
    site.do(sync_crm.defer, site.q, customer, str(site.scratch / "no-consent"))
    expect(page.locator("table.tasks")).to_contain_text(f"no consent from {customer} yet")
    page.context.close()
