"""The dashboard's operations pages in a real browser (Debian's Chromium), on
SQLite and PostgreSQL: webhooks (endpoints, health, attempts, failed
deliveries, re-drive, disable and enable), workers (the registry, work no
worker serves) and pausing a queue. The SQLite run saves the screenshots of docs/dashboard.md."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Browser, expect
from polling import wait_for
from webhooks.http_receiver import Receiver
from webhooks.http_receiver import serving as receiving

from dashboard.demo_app import WORKER_ID
from dashboard.sites import Site, reloaded, shot
from querator import Item, QueueSettings
from querator.errors import RequestTimeout
from querator.webhooks import DeliveryWorker, FailedDelivery, Webhooks, WebhookSettings
from querator.workflows.keys import step_kind

expect.set_options(timeout=20_000)

ONE_ATTEMPT = WebhookSettings(
    schedule=(0.0,), jitter=0.0, timeout=10.0, connect_timeout=5.0, allow_private=True
)
"""One attempt per delivery (a failure is final at once); local targets allowed."""


@contextmanager
def delivering(site: Site) -> Iterator[DeliveryWorker]:
    """A delivery worker on the site's store in a thread, for the block."""
    worker = DeliveryWorker(site.q, ONE_ATTEMPT, client_id=f"hooks-{site.backend}")
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(timeout=30)
        assert not thread.is_alive(), "the delivery worker did not stop"


def test_webhooks_show_health_attempts_and_redrive(site: Site, browser: Browser) -> None:
    hooks = Webhooks(site.q, ONE_ATTEMPT)
    with receiving(Receiver()) as receiver, delivering(site):
        billing = site.do(hooks.add_endpoint, receiver.url("ok"), description="billing")
        # the crm answers 500 to a message's first delivery, then 200
        crm = site.do(hooks.add_endpoint, receiver.url("flaky/1"), description="crm")
        sent = site.do(hooks.send, "invoice.paid", {"id": f"in-{site.backend}", "cents": 3999})

        def failed() -> list[FailedDelivery]:
            return site.do(hooks.failed, endpoint_id=crm.id)

        wait_for(failed, timeout=30, message="the crm delivery failed")
        wait_for(lambda: receiver.at("ok"), timeout=30, message="billing got the message")

        page = site.sign_in(browser, "write")
        page.goto("/ui/webhooks")
        expect(page.locator(f"tr[data-endpoint='{billing.id}']")).to_contain_text("billing")
        expect(page.locator(f"tr[data-endpoint='{crm.id}']")).to_contain_text("/flaky/1")
        expect(page.locator("table.failed")).to_contain_text(sent.id)
        shot(site, page, "webhooks")

        page.click(f"a[href='/ui/webhooks/endpoints/{crm.id}']")
        expect(page.locator("[data-health=success]")).to_contain_text("0 %")
        expect(page.locator("[data-health=error]")).to_contain_text("HTTP 500")
        expect(page.locator("table.attempts")).to_contain_text("dead")
        shot(site, page, "webhook-endpoint")

        page.click(f"table.attempts a[href='/ui/webhooks/messages/{sent.id}']")
        expect(page.locator("#payload")).to_contain_text(f'"id": "in-{site.backend}"')
        expect(page.locator("table.attempts")).to_contain_text("delivered")
        expect(page.locator("table.attempts")).to_contain_text("dead")

        # the crm's failed delivery is re-driven and arrives
        page.goto(f"/ui/webhooks/endpoints/{crm.id}")
        row = page.locator("table.failed tbody tr").first
        row.locator("input[type=checkbox]").check()
        page.click("button[data-action='Re-drive selected']")
        expect(page.locator("table.failed")).to_have_count(0)
        wait_for(
            lambda: len(site.do(hooks.attempts, endpoint_id=crm.id)) == 2,
            timeout=30,
            message="the re-driven attempt is recorded",
        )
        assert len(receiver.at("flaky/1")) == 2
        page.reload()
        expect(page.locator("[data-health=success]")).to_contain_text("50 %")

        page.on("dialog", lambda dialog: dialog.accept())
        page.click("button[data-action=Disable]")
        expect(page.locator("h1 .badge")).to_have_text("disabled")
        assert site.do(hooks.get_endpoint, crm.id).disabled is True
        page.click("button[data-action=Enable]")
        expect(page.locator("h1 .badge")).to_have_text("enabled")
        assert site.do(hooks.get_endpoint, crm.id).disabled is False
        page.context.close()


def test_a_read_only_token_cannot_redrive(site: Site, browser: Browser) -> None:
    hooks = Webhooks(site.q, ONE_ATTEMPT)
    with receiving(Receiver()) as receiver, delivering(site):
        crm = site.do(hooks.add_endpoint, receiver.url("fail"), description="read only")
        site.do(hooks.send, "invoice.voided", {"id": "ro"})
        found = wait_for(lambda: site.do(hooks.failed, endpoint_id=crm.id), timeout=30)
        page = site.sign_in(browser, "read")
        page.goto(f"/ui/webhooks/endpoints/{crm.id}")
        expect(page.locator("table.failed")).to_contain_text(found[0].id)
        expect(page.locator("button[data-action], input[type=checkbox]")).to_have_count(0)
        csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "querator_csrf")
        answer = page.request.post("/ui/webhooks/redrive", form={"csrf": csrf, "id": found[0].id})
        assert answer.status == 403
        assert [f.id for f in site.do(hooks.failed, endpoint_id=crm.id)] == [found[0].id]
        page.context.close()


def test_workers_show_the_registry_and_unserved_work(site: Site, browser: Browser) -> None:
    queue = f"shop.reports-{site.backend}"
    site.do(site.q.create_queue, queue, QueueSettings(lease_timeout=30, expire_timeout=86_400))
    waited = datetime.now(UTC) - timedelta(minutes=5)  # waits past the page's grace
    item = Item(payload=b"{}", kind=step_kind("reports.monthly"), enqueue_at=waited)
    site.do(site.q.produce, queue, [item])

    page = site.sign_in(browser, "read")
    page.goto("/ui/workers")
    row = page.locator(f"tr[data-worker='{WORKER_ID}']")
    expect(row).to_contain_text("live")
    expect(row).to_contain_text("shop.fulfil")
    unserved = page.locator(f"tr[data-unserved='{queue}/{step_kind('reports.monthly')}']")
    expect(unserved).to_contain_text("no worker serving step 'reports.monthly'")
    shot(site, page, "workers")
    page.context.close()


def test_a_write_token_pauses_and_resumes_a_queue(site: Site, browser: Browser) -> None:
    name = f"pausable-{site.backend}"
    site.do(site.q.create_queue, name, exist_ok=True)
    site.do(site.q.produce, name, [Item(payload=b"held back while paused")])
    page = site.sign_in(browser, "write")
    page.goto(f"/ui/queues/{name}")
    expect(page.locator("#paused")).to_have_count(0)
    page.on("dialog", lambda dialog: dialog.accept())
    with reloaded(page):
        page.locator("button[data-action=Pause]").click()
    expect(page.locator("h1 #paused")).to_have_text("paused")
    assert site.do(site.q.get_queue, name).paused
    page.goto("/ui/queues")
    expect(page.locator(f"tr[data-queue='{name}'] .badge.paused")).to_have_text("paused")
    page.goto(f"/ui/queues/{name}")
    with pytest.raises(RequestTimeout):
        site.do(site.q.lease, name, client_id="dashboard-test")
    with reloaded(page):
        page.locator("button[data-action=Resume]").click()
    expect(page.locator("#paused")).to_have_count(0)
    expect(page.locator("button[data-action=Pause]")).to_be_visible()
    [item] = site.do(site.q.lease, name, client_id="dashboard-test", timeout=10)
    assert item.payload == b"held back while paused"
    site.do(site.q.complete, name, [item])
    page.context.close()


def test_a_read_only_token_cannot_pause_a_queue(site: Site, browser: Browser) -> None:
    name = f"unpausable-{site.backend}"
    site.do(site.q.create_queue, name, exist_ok=True)
    page = site.sign_in(browser, "read")
    page.goto(f"/ui/queues/{name}")
    expect(page.locator("h1")).to_have_text(name)
    expect(page.locator("button[data-action]")).to_have_count(0)
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "querator_csrf")
    answer = page.request.post(f"/ui/queues/{name}/pause", form={"csrf": csrf})
    assert answer.status == 403
    assert not site.do(site.q.get_queue, name).paused
    page.context.close()


def _churn(site: Site, name: str) -> int:
    """Produce five items into ``name`` and complete three: how many were completed."""
    site.q.produce(name, [Item(payload=f"job {n}".encode()) for n in range(5)])
    leased = site.q.lease(name, client_id="churner", batch_size=3, timeout=10)
    site.q.complete(name, leased)
    return len(leased)


def test_the_queues_page_draws_what_went_in_and_out(site: Site, browser: Browser) -> None:
    name = f"throughput-{site.backend}"
    site.do(site.q.create_queue, name, exist_ok=True)
    page = site.sign_in(browser, "read")
    row = page.locator(f"tr[data-queue='{name}']")

    def drawn(went_in: str, went_out: str) -> bool:
        page.goto("/ui/queues")
        shown = row.locator("[data-throughput=in]")
        if not shown.count():
            return False  # sampled fewer than twice yet
        out = row.locator("[data-throughput=out]").inner_text()
        return shown.inner_text() == went_in and out == went_out

    wait_for(lambda: drawn("0", "0"), timeout=30, message="the queue sampled")
    completed = site.do(_churn, site, name)
    wait_for(lambda: drawn("5", str(completed)), timeout=30, message="5 in, 3 out drawn")
    expect(row.locator("svg.throughput rect.in").first).to_be_visible()
    expect(row.locator("svg.throughput rect.out").first).to_be_visible()
    page.goto(f"/ui/queues/{name}")
    expect(page.locator("dd.throughput [data-throughput=in]")).to_have_text("5")
    page.context.close()
