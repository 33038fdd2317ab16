"""The dashboard in a real browser (Debian's Chromium), on SQLite and PostgreSQL:
sign-in, live run pages, cancel, dead letters, read-only tokens, forged
cross-site posts, escaping. The SQLite run saves the screenshots of
docs/dashboard.md."""

from __future__ import annotations

import functools
import http.server
import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from playwright.sync_api import Browser, Dialog, Page, expect
from polling import wait_for

from dashboard.demo_app import (
    MAILS,
    WORKER_ID,
    bounce_mails,
    deliver_mails,
    dispatch,
    gate,
    hello_example,
    label,
    nap,
    open_gate,
    order_example,
    publisher,
    transfer,
    unserved,
)
from dashboard.sites import IMAGES, TRACE_URL, Site, reloaded, shot
from querator import Item, QueueSettings
from querator.dashboard.session import CSRF_COOKIE, SESSION_COOKIE
from querator.limits import RateLimit, RateLimiter
from querator.locks import Semaphore
from querator.workflows import get_event, get_run, get_schedule, schedule, send, start

expect.set_options(timeout=20_000)


def ended(site: Site, run_id: str) -> bool:
    return site.do(get_run, site.q, run_id).status != "running"


def test_pages_show_the_shop_with_steps_and_compensations(site: Site, browser: Browser) -> None:
    shop = order_example()
    kettle = shop.Order(id=f"k-{site.backend}", item="kettle", quantity=1, cents=3_999)
    piano = shop.Order(id=f"p-{site.backend}", item="piano", quantity=1, cents=899_000)
    mugs = shop.Order(id=f"m-{site.backend}", item="mugs", quantity=6, cents=2_400)
    runs = [site.do(start, site.q, shop.fulfil, order) for order in (kettle, piano, mugs)]
    napping = site.do(start, site.q, nap, "wake me in an hour")
    for run in runs:
        wait_for(functools.partial(ended, site, run.run_id), timeout=60)
    site.do(bounce_mails, site.q, ["ana@example.com", "bo@example.com", "cy@example.com"])

    page = site.sign_in(browser, "write")
    row = page.locator(f"tr[data-run='{runs[1].run_id}']")
    expect(row).to_contain_text("compensated")
    expect(page.locator(f"tr[data-run='{napping.run_id}']")).to_contain_text("running")
    expect(page.locator("[data-count=compensated]")).not_to_have_text("0")
    shot(site, page, "runs")

    page.click(f"a[href='/ui/runs/{runs[1].run_id}']")
    expect(page.locator("h1")).to_contain_text("compensated")
    expect(page.locator("table.steps").first).to_contain_text("shop.reserve_stock")
    expect(page.locator("body")).to_contain_text("card declined for 8990.00")
    expect(page.locator("body")).to_contain_text("shop.release_stock")
    shot(site, page, "run")

    page.goto("/ui/queues")
    expect(page.locator(f"tr[data-queue='{MAILS}']")).to_be_visible()
    dead_depth = page.locator(f"tr[data-queue='{MAILS}'] td.dead a").inner_text()
    assert int(dead_depth.rstrip("~")) >= 3, dead_depth  # the three bounced mails at least
    expect(page.locator(f"tr[data-queue='{MAILS}-dead'] td.dead")).to_have_text("\u2013")
    wait_for(lambda: _went_in(page, MAILS) >= 3, timeout=30, message="the mails drawn")
    shot(site, page, "queues")
    page.goto(f"/ui/queues/{MAILS}")
    expect(page.locator("table.dead")).to_contain_text("mail.receipt")
    shot(site, page, "dead-letters")
    page.context.close()


def _went_in(page: Page, queue: str) -> int:
    """The queues page, loaded anew: how many items went into ``queue`` in its
    sparkline's span (-1 while it is sampling)."""
    page.goto("/ui/queues")
    drawn = page.locator(f"tr[data-queue='{queue}'] [data-throughput=in]")
    return int(drawn.inner_text()) if drawn.count() else -1


def test_a_run_page_goes_from_running_to_completed_without_reload(
    site: Site, browser: Browser
) -> None:
    gate_file = site.scratch / f"gate-{id(site)}-{site.backend}"
    run = site.do(start, site.q, gate, str(gate_file))
    page = site.sign_in(browser, "read")
    page.goto(f"/ui/runs/{run.run_id}")
    expect(page.locator("h1 .badge")).to_have_text("running")
    expect(page.locator("body")).to_have_attribute("data-live-state", "open")
    page.evaluate("window.notReloaded = true")

    open_gate(gate_file, "the test")

    wait_for(functools.partial(ended, site, run.run_id), timeout=30)
    expect(page.locator("h1 .badge")).to_have_text("completed")
    expect(page.locator("#result")).to_contain_text('"opened_with": "the test"')
    assert page.evaluate("window.notReloaded") is True
    page.context.close()


def _start_traced(site: Site, trace_id: int) -> str:
    """Start a nap inside a span of trace ``trace_id`` (its context only: no SDK needed)."""
    context = SpanContext(trace_id, 0x1234, is_remote=False, trace_flags=TraceFlags(1))
    with trace.use_span(NonRecordingSpan(context)):
        return start(site.q, nap, "traced").run_id


def test_a_traced_run_links_to_its_trace(site: Site, browser: Browser) -> None:
    traced = site.do(_start_traced, site, 0xABC123 + len(site.backend))
    page = site.sign_in(browser, "read")
    page.goto(f"/ui/runs/{traced}")
    expected = TRACE_URL.replace("{trace_id}", f"{0xABC123 + len(site.backend):032x}")
    expect(page.locator("a#trace")).to_have_attribute("href", expected)
    page.context.close()


def test_the_runs_page_draws_runs_per_hour_by_outcome(site: Site, browser: Browser) -> None:
    run = site.do(start, site.q, label, f"spark-{site.backend}")
    wait_for(lambda: ended(site, run.run_id), timeout=60, message="the label run ended")
    page = site.sign_in(browser, "read")
    page.goto("/ui/runs?workflow=demo.label")
    completed = page.locator("figure.spark[data-outcome=completed]")
    total = int(completed.locator("[data-total=completed]").inner_text().rstrip("+"))
    assert total >= 1
    # the newest hour, where the run started, has a bar of its own
    expect(completed.locator("rect.bar.completed").last).not_to_have_class(re.compile("none"))
    expect(page.locator("figure.spark[data-outcome=failed]")).to_be_visible()
    page.context.close()


def test_a_run_page_shows_what_the_run_waits_for_and_its_steps_progress(
    site: Site, browser: Browser
) -> None:
    gate_file = site.scratch / f"progress-{site.backend}"
    run = site.do(start, site.q, gate, str(gate_file))
    page = site.sign_in(browser, "read")

    def reported() -> bool:
        page.goto(f"/ui/runs/{run.run_id}")
        return page.locator("table.pending td.progress", has_text=gate_file.name).count() == 1

    wait_for(reported, timeout=30, message="the step's progress shown")
    expect(page.locator("#waiting-for [data-wait=step]")).to_contain_text("demo.wait_for_file")
    shot(site, page, "run-waits")
    open_gate(gate_file, "progress seen")
    wait_for(functools.partial(ended, site, run.run_id), timeout=30)
    page.context.close()


def test_cancelling_a_run_from_its_page(site: Site, browser: Browser) -> None:
    run = site.do(start, site.q, nap, "to be cancelled")
    page = site.sign_in(browser, "write")
    page.goto(f"/ui/runs/{run.run_id}")
    expect(page.locator("#waiting-for [data-wait=timer]")).to_contain_text("a timer")
    page.click("button[data-action=Cancel]")
    expect(page.locator("h1 .badge")).to_have_text("cancelled")
    assert site.do(get_run, site.q, run.run_id).status == "cancelled"
    expect(page.locator("button[data-action=Resume]")).to_be_visible()
    page.context.close()


def test_requeueing_and_purging_dead_letters(site: Site, browser: Browser) -> None:
    mails = ["x@example.com", "y@example.com", "z@example.com"]
    first, second, third = site.do(bounce_mails, site.q, mails)
    page = site.sign_in(browser, "write")
    page.goto(f"/ui/queues/{MAILS}")
    with reloaded(page):
        page.locator(f"tr[data-item='{first}'] button[data-action=Requeue]").click()
    expect(page.locator(f"tr[data-item='{first}']")).to_have_count(0)
    expect(page.locator(f"tr[data-item='{second}']")).to_be_visible()
    items = site.do(site.q.list_items, MAILS, limit=1000)
    assert [item.payload for item in items] == [b'{"to": "x@example.com", "template": "receipt"}']
    assert site.do(deliver_mails, site.q) == 1

    page.on("dialog", lambda dialog: dialog.accept())
    with reloaded(page):
        page.locator(f"tr[data-item='{third}'] button[data-action=Purge]").click()
    expect(page.locator(f"tr[data-item='{third}']")).to_have_count(0)
    expect(page.locator(f"tr[data-item='{second}']")).to_be_visible()
    page.context.close()


def _csrf(page: Page) -> str:
    return next(c["value"] for c in page.context.cookies() if c["name"] == "querator_csrf")


def test_a_read_only_token_sees_no_action_and_cannot_post(site: Site, browser: Browser) -> None:
    run = site.do(start, site.q, nap, "read only")
    site.do(bounce_mails, site.q, ["ro@example.com"])
    page = site.sign_in(browser, "read")
    page.goto(f"/ui/runs/{run.run_id}")
    expect(page.locator("h1 .badge")).to_have_text("running")
    expect(page.locator("button[data-action]")).to_have_count(0)
    page.goto(f"/ui/queues/{MAILS}")
    expect(page.locator("table.dead")).to_be_visible()
    expect(page.locator("button[data-action]")).to_have_count(0)

    answer = page.request.post(f"/ui/runs/{run.run_id}/cancel", form={"csrf": _csrf(page)})
    assert answer.status == 403
    assert "write needed" in answer.text()
    assert site.do(get_run, site.q, run.run_id).cancel_requested is False
    page.context.close()


@contextmanager
def attacker_site(html: str) -> Iterator[str]:
    """Another origin serving ``html`` at ``/``; its URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = html.encode()
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_a_forged_cross_site_post_is_refused(site: Site, browser: Browser) -> None:
    run = site.do(start, site.q, nap, "not yours to cancel")
    page = site.sign_in(browser, "write")
    target = f"{site.url}/ui/runs/{run.run_id}/cancel"
    forged = (
        f'<form method="post" action="{target}"><input name="csrf" value="guessed"></form>'
        "<script>document.forms[0].submit()</script>"
    )
    with attacker_site(forged) as evil, page.expect_response(target) as answer:
        page.goto(evil)
    assert answer.value.status == 403
    # Even with the right CSRF token, another origin is refused.
    stolen = page.request.post(target, form={"csrf": _csrf(page)}, headers={"origin": evil[:-1]})
    assert stolen.status == 403
    assert site.do(get_run, site.q, run.run_id).cancel_requested is False
    page.context.close()


def test_user_strings_render_as_text(site: Site, browser: Browser) -> None:
    hostile = "<script>alert('owned')</script><img src=x onerror=alert(1)>"
    run = site.do(start, site.q, nap, hostile)
    page = site.sign_in(browser, "read")
    dialogs: list[str] = []

    def refuse(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", refuse)
    page.goto(f"/ui/runs/{run.run_id}")
    expect(page.locator("#args")).to_contain_text(hostile)
    assert page.locator("main script, main img").count() == 0
    page.goto("/ui/runs?workflow=demo.nap")
    expect(page.locator(f"tr[data-run='{run.run_id}'] td.args")).to_contain_text("<script>")
    assert dialogs == []
    page.context.close()


def _approved(site: Site, run_id: str) -> bool:
    status = site.do(get_event, site.q, run_id, "status")
    return isinstance(status, dict) and status.get("state") == "approved"


def test_published_values_and_messages_render_as_text(site: Site, browser: Browser) -> None:
    hostile = "<script>alert('published')</script>"
    run = site.do(start, site.q, publisher, hostile)
    site.do(send, site.q, run.run_id, "approval", "<b>ana</b>")
    site.do(send, site.q, run.run_id, "approval", "<i>too late</i>")
    wait_for(functools.partial(_approved, site, run.run_id), timeout=60)
    page = site.sign_in(browser, "read")
    dialogs: list[str] = []

    def refuse(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", refuse)
    page.goto(f"/ui/runs/{run.run_id}")
    event = page.locator("table.events tr[data-event=status]")
    expect(event).to_contain_text(hostile)
    expect(event).to_contain_text('"state": "approved"')
    stream = page.locator("table.streams tr[data-stream=log]")
    expect(stream.locator("li")).to_have_count(2)
    expect(stream.locator("li").first).to_contain_text(hostile)
    expect(stream).to_contain_text("closed")
    messages = page.locator("table.messages tr[data-topic=approval]")
    expect(messages).to_have_count(2)
    expect(messages.nth(0)).to_contain_text("<b>ana</b>")
    expect(messages.nth(0)).to_contain_text("received")
    expect(messages.nth(1)).to_contain_text("<i>too late</i>")
    expect(messages.nth(1)).to_contain_text("unread")
    assert page.locator("main script, main b, main i").count() == 0
    assert dialogs == []
    page.context.close()


def _has_status(site: Site, run_id: str) -> bool:
    return site.do(get_event, site.q, run_id, "status") is not None


def test_an_example_run_shows_what_it_published_and_was_sent(site: Site, browser: Browser) -> None:
    """``hello.approval`` of examples/workflows_hello.py: its status event, its
    log stream (closed) and the messages sent to it, one read, one not."""
    run = site.do(start, site.q, hello_example().approval, "ana")
    wait_for(functools.partial(_has_status, site, run.run_id), timeout=60)
    # the unread one goes first, on a topic the run never reads: a second
    # ``approve`` after the first could find the run already ended (RunFinished)
    site.do(send, site.q, run.run_id, "comment", {"by": "cy", "note": "late"})
    site.do(send, site.q, run.run_id, "approve", {"approved_by": "bo", "note": "ship it"})
    wait_for(functools.partial(ended, site, run.run_id), timeout=60)
    page = site.sign_in(browser, "read")
    page.goto(f"/ui/runs/{run.run_id}")
    expect(page.locator("h1 .badge")).to_have_text("completed")
    status = page.locator("table.events tr[data-event=status]")
    expect(status).to_contain_text('"waiting_for": "ana"')
    log = page.locator("table.streams tr[data-stream=log]")
    expect(log.locator("li")).to_have_count(2)
    expect(log.locator("li").nth(1)).to_contain_text("ship it")
    expect(log).to_contain_text("closed")
    expect(page.locator("table.messages tr[data-topic=approve]")).to_contain_text("received")
    expect(page.locator("table.messages tr[data-topic=comment]")).to_contain_text("unread")
    shot(site, page, "run-published")
    page.context.close()


def test_the_session_cookies_and_headers_are_strict(site: Site, browser: Browser) -> None:
    page = site.sign_in(browser, "read")
    answer = page.goto("/ui/runs")
    assert answer is not None
    policy = answer.headers["content-security-policy"]
    for rule in ("default-src 'none'", "script-src 'self'", "frame-ancestors 'none'"):
        assert rule in policy, policy
    cookies = {c["name"]: c for c in page.context.cookies()}
    for name in (SESSION_COOKIE, CSRF_COOKIE):
        cookie = cookies[name]
        assert (cookie["httpOnly"], cookie["sameSite"], cookie["path"]) == (True, "Strict", "/ui")
        assert cookie["secure"] is False  # plain http here: Secure only over https
    page.context.close()


def test_a_wrong_token_is_refused_at_sign_in(site: Site, browser: Browser) -> None:
    context = browser.new_context(base_url=site.url)
    page = context.new_page()
    page.goto("/ui/login")
    page.fill("input[name=token]", "qrt_nope_nope")
    page.click("form.login button")
    expect(page.locator(".error")).to_contain_text("api key is invalid")
    page.goto("/ui/queues")
    expect(page).to_have_url(f"{site.url}/ui/login")
    context.close()


@pytest.fixture(autouse=True, scope="module")
def _images() -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)


def test_assets_are_served_by_querator(site: Site, browser: Browser) -> None:
    page = site.sign_in(browser, "read")
    requested: list[str] = []
    errors: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.on(
        "console", lambda message: errors.append(message.text) if message.type == "error" else None
    )
    page.goto("/ui/runs")
    expect(page.locator("body")).to_have_attribute("data-live-state", "open")
    page.goto("/ui/queues")
    expect(page.locator("h1")).to_have_text("Queues")
    assert requested and all(url.startswith(site.url) for url in requested)
    assert any(url.endswith("/ui/static/htmx.min.js") for url in requested)
    assert errors == [], errors  # no script or style refused by the Content-Security-Policy
    page.context.close()


def test_schedules_are_paused_resumed_and_triggered(site: Site, browser: Browser) -> None:
    name = f"nightly-nap-{site.backend}"
    site.do(schedule, site.q, name, nap, cron="0 3 * * *", tz="Europe/Paris", args=("nightly",))
    page = site.sign_in(browser, "write")
    page.goto("/ui/schedules")
    row = page.locator(f"tr[data-schedule='{name}']")
    expect(row).to_contain_text("0 3 * * *")
    row.locator("button[data-action=Pause]").click()
    expect(row).to_contain_text("paused")
    assert site.do(get_schedule, site.q, name).paused is True
    row.locator("button[data-action=Resume]").click()
    expect(row.locator("button[data-action=Pause]")).to_be_visible()
    assert site.do(get_schedule, site.q, name).paused is False

    page.on("dialog", lambda dialog: dialog.accept())
    row.locator("button[data-action=Trigger]").click()
    expect(page).to_have_url(re.compile(r"/ui/runs/run-"))
    expect(page.locator("#args")).to_contain_text("nightly")
    page.goto("/ui/schedules")
    expect(row.locator(".badge.running")).to_be_visible()
    expect(row.locator(".badge", has_text="orphan")).to_have_count(0)
    orphan = f"nobody-serves-{site.backend}"
    site.do(schedule, site.q, orphan, unserved, cron="0 4 1 1 *", args=("lost",))
    page.goto("/ui/schedules")
    orphan_row = page.locator(f"tr[data-schedule='{orphan}']")
    expect(orphan_row.locator(".badge", has_text="orphan")).to_be_visible()
    shot(site, page, "schedules")
    page.context.close()


def test_locks_show_their_holders_waiters_and_rate_limits(site: Site, browser: Browser) -> None:
    name = f"report-slots-{site.backend}"
    semaphore = site.do(Semaphore, site.q, name, 1, client_id="reporter-7")
    queued = site.do(Semaphore, site.q, name, 1, client_id="reporter-9")
    # a key's slots are spread over the period: the second of 2 per hour comes in 30 min
    limiter = site.do(RateLimiter, site.q, RateLimit(f"exports-{site.backend}", 2, per=3600))
    assert site.do(limiter.try_acquire, "acme").allowed
    assert not site.do(limiter.try_acquire, "acme").allowed
    permit = site.do(semaphore.acquire_permit, 10)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(queued.acquire_permit, 60)
        try:
            page = site.sign_in(browser, "read")
            page.goto("/ui/locks")
            row = page.locator(f"tr[data-semaphore='{name}']")
            expect(row).to_contain_text("reporter-7")
            expect(row).to_contain_text(f"token {permit.token}")

            def waiter_shown() -> bool:  # the waiter registers once it finds no permit
                page.reload()
                return "reporter-9" in (row.locator("td.waiters").text_content() or "")

            wait_for(waiter_shown, timeout=30, interval=0.2, message="the waiter is listed")
            rate = page.locator(f"tr[data-rate='exports-{site.backend}']")
            expect(rate).to_contain_text("2 per 60 min")
            expect(rate.locator("[data-key=acme]")).to_contain_text("1/2, next start at")
            shot(site, page, "locks")
            page.context.close()
        finally:
            site.do(semaphore.release, permit)
        site.do(queued.release, waiting.result(timeout=60))


def test_a_run_page_shows_its_timeline_retries_and_child_runs(site: Site, browser: Browser) -> None:
    marker = site.scratch / f"flaky-{site.backend}"
    run = site.do(start, site.q, dispatch, "o-77", str(marker))
    wait_for(functools.partial(ended, site, run.run_id), timeout=60)
    child = site.do(get_run, site.q, run.run_id).steps[1]
    assert child.step == "demo.label"

    page = site.sign_in(browser, "read")
    page.goto(f"/ui/runs/{run.run_id}")
    lookup = page.locator("table.timeline tr[data-lane='0']")
    expect(lookup).to_contain_text("demo.flaky_lookup")
    expect(lookup).to_contain_text("1 retried")
    expect(lookup.locator("rect.bar.completed")).to_have_count(1)
    first, second = lookup.locator("li[data-attempt='1']"), lookup.locator("li[data-attempt='2']")
    expect(first).to_contain_text("ConnectionError: the address book did not answer")
    expect(first.locator("code.worker")).to_have_text(WORKER_ID)
    expect(second).to_have_class("completed")
    expect(lookup.locator("rect.try.failed")).to_have_count(1)
    expect(lookup.locator("rect.try.completed")).to_have_count(1)
    labelled = page.locator("table.timeline tr[data-lane='1']")
    expect(labelled.locator("a")).to_have_text("demo.label")
    expect(page.locator("table.children")).to_contain_text("completed")
    shot(site, page, "run-timeline")

    labelled.locator("a").click()
    expect(page.locator("#result")).to_contain_text("label for o-77")
    page.click(f"dl.facts a[href='/ui/runs/{run.run_id}']")  # the parent link
    expect(page).to_have_url(f"{site.url}/ui/runs/{run.run_id}")
    page.context.close()


def test_runs_are_filtered_by_time_and_id(site: Site, browser: Browser) -> None:
    first = site.do(start, site.q, nap, "filtered first")
    between = site.do(get_run, site.q, first.run_id).started_at
    second = site.do(start, site.q, nap, "filtered second")
    page = site.sign_in(browser, "read")

    page.goto(f"/ui/runs?id={second.run_id[:12]}")
    expect(page.locator(f"tr[data-run='{second.run_id}']")).to_be_visible()
    assert all(
        run_id.startswith(second.run_id[:12])
        for run_id in page.locator("tr[data-run]").evaluate_all(
            "rows => rows.map(r => r.dataset.run)"
        )
    )
    since = (between + timedelta(microseconds=1)).strftime("%Y-%m-%dT%H:%M:%S.%f")
    page.goto(f"/ui/runs?workflow=demo.nap&since={since}")
    expect(page.locator(f"tr[data-run='{second.run_id}']")).to_be_visible()
    expect(page.locator(f"tr[data-run='{first.run_id}']")).to_have_count(0)
    page.goto(f"/ui/runs?workflow=demo.nap&until={since}")
    expect(page.locator(f"tr[data-run='{first.run_id}']")).to_be_visible()
    expect(page.locator(f"tr[data-run='{second.run_id}']")).to_have_count(0)
    page.goto("/ui/runs?since=yesterday")
    expect(page.locator("p.error")).to_contain_text("since")
    page.context.close()


def test_runs_are_filtered_by_search_attributes(site: Site, browser: Browser) -> None:
    acme = site.do(start, site.q, nap, "attrs acme", attributes={"customer": "acme", "n": 7})
    globex = site.do(start, site.q, nap, "attrs globex", attributes={"customer": "globex"})
    labelled = site.do(start, site.q, label, "attrs acme", attributes={"customer": "acme"})
    wait_for(lambda: ended(site, labelled.run_id), timeout=60, message="the label run ended")
    page = site.sign_in(browser, "read")
    page.goto("/ui/runs")
    page.locator("input[name=where]").last.fill("customer=acme")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator(f"tr[data-run='{acme.run_id}']")).to_be_visible()
    expect(page.locator(f"tr[data-run='{labelled.run_id}']")).to_be_visible()
    expect(page.locator(f"tr[data-run='{globex.run_id}']")).to_have_count(0)
    assert "where=customer%3Dacme" in page.url  # the filter is in the URL
    # the counts are those of the runs holding the attribute, and link with it
    expect(page.locator("[data-count=running]")).to_have_text("1")
    expect(page.locator("[data-count=completed]")).to_have_text("1")
    running = page.locator("ul.counts a", has=page.locator("[data-count=running]"))
    expect(running).to_have_attribute("href", re.compile("where=customer%3Dacme"))
    shot(site, page, "runs-attributes")
    page.goto("/ui/runs?where=customer%3Dacme&where=n%3D8")  # an AND: none holds both
    expect(page.locator(f"tr[data-run='{acme.run_id}']")).to_have_count(0)
    page.goto("/ui/runs?where=customer%3Dacme&where=n%3D7")
    expect(page.locator(f"tr[data-run='{acme.run_id}']")).to_be_visible()
    expect(page.locator("input[name=where]").first).to_have_value("customer=acme")
    page.goto(f"/ui/runs/{acme.run_id}")  # its attributes link to the runs holding them
    page.locator("#attributes a", has_text="n=7").click()
    expect(page.locator(f"tr[data-run='{acme.run_id}']")).to_be_visible()
    expect(page.locator(f"tr[data-run='{globex.run_id}']")).to_have_count(0)
    page.goto("/ui/runs?where=amount")
    expect(page.locator("p.error")).to_contain_text("where")
    page.context.close()


def test_selected_runs_are_cancelled_and_resumed_in_bulk(site: Site, browser: Browser) -> None:
    runs = [site.do(start, site.q, nap, f"bulk {n}") for n in range(3)]
    page = site.sign_in(browser, "write")
    page.goto("/ui/runs?workflow=demo.nap")
    picked = runs[:2]
    for run in picked:
        page.locator(f"#pick-{run.run_id}").check()
    # a live refresh (a run starts) keeps the ticks
    extra = site.do(start, site.q, nap, "arrives while rows are ticked")
    expect(page.locator(f"tr[data-run='{extra.run_id}']")).to_be_visible()
    expect(page.locator(f"#pick-{picked[0].run_id}")).to_be_checked()
    page.click("button[data-action='Cancel selected']")
    expect(page.locator("#done")).to_contain_text("Cancellation asked for: 2 runs.")
    expect(page).to_have_url(re.compile(r"workflow=demo\.nap"))
    for run in picked:
        wait_for(functools.partial(ended, site, run.run_id), timeout=30)
        assert site.do(get_run, site.q, run.run_id).status == "cancelled"
    assert site.do(get_run, site.q, runs[2].run_id).cancel_requested is False

    page.goto("/ui/runs?workflow=demo.nap&status=cancelled")
    for run in picked:
        page.locator(f"#pick-{run.run_id}").check()
    page.click("button[data-action='Resume selected']")
    expect(page.locator("#done")).to_contain_text("Resumed: 2 runs.")
    for run in picked:
        assert site.do(get_run, site.q, run.run_id).status == "running"
    shot(site, page, "runs-filtered")
    page.context.close()


def test_selected_dead_letters_are_requeued_and_purged(site: Site, browser: Browser) -> None:
    mails = [f"{n}-bulk-{site.backend}@example.com" for n in range(4)]
    first, second, third, fourth = site.do(bounce_mails, site.q, mails)
    page = site.sign_in(browser, "write")
    page.goto(f"/ui/queues/{MAILS}")
    for item_id in (first, second):
        page.locator(f"tr[data-item='{item_id}'] input[type=checkbox]").check()
    with reloaded(page):
        page.click("button[data-action='Requeue selected']")
    expect(page.locator(f"tr[data-item='{first}']")).to_have_count(0)
    expect(page.locator(f"tr[data-item='{second}']")).to_have_count(0)
    expect(page.locator(f"tr[data-item='{third}']")).to_be_visible()
    assert site.do(deliver_mails, site.q) == 2

    page.on("dialog", lambda dialog: dialog.accept())
    page.locator(f"tr[data-item='{third}'] input[type=checkbox]").check()
    with reloaded(page):
        page.click("button[data-action='Purge selected']")
    expect(page.locator(f"tr[data-item='{third}']")).to_have_count(0)
    expect(page.locator(f"tr[data-item='{fourth}']")).to_be_visible()
    dead = site.do(site.q.list_items, f"{MAILS}-dead", limit=1000)
    assert third not in {item.id for item in dead} and fourth in {item.id for item in dead}
    assert site.do(site.q.list_items, MAILS, limit=1000) == []  # purged, not requeued
    page.context.close()


def test_the_item_browser_pages_through_a_queue(site: Site, browser: Browser) -> None:
    queue = f"shop.invoices-{site.backend}"
    site.do(site.q.create_queue, queue, QueueSettings(lease_timeout=30, expire_timeout=86_400))
    texts = [Item(payload=f'{{"invoice": {n}}}'.encode(), kind="invoice") for n in range(55)]
    binary = Item(payload=bytes([0xFF, 0x00, 0x9C, 0x42]), kind="invoice.pdf")
    later = Item(
        payload=b"later", kind="invoice", enqueue_at=datetime.now(UTC) + timedelta(hours=1)
    )
    ids = site.do(site.q.produce, queue, [*texts, binary, later])

    page = site.sign_in(browser, "read")
    page.goto(f"/ui/queues/{queue}")
    page.click("#browse")
    expect(page.locator("table.items tbody tr")).to_have_count(50)
    expect(page.locator(f"tr[data-item='{ids[0]}'] pre")).to_contain_text('"invoice": 0')
    shot(site, page, "queue-items")
    page.click("a[rel=next]")
    expect(page.locator(f"tr[data-item='{ids[55]}'] pre")).to_contain_text("(4 bytes) ff009c42")
    expect(page.locator(f"tr[data-item='{ids[0]}']")).to_have_count(0)
    page.select_option("select[name=scheduled]", "1")
    page.click("form.filters button")
    expect(page.locator("table.items tbody tr")).to_have_count(1)
    expect(page.locator(f"tr[data-item='{ids[56]}']")).to_contain_text("scheduled for")
    page.context.close()


def test_every_matching_run_is_cancelled_after_a_confirmation(site: Site, browser: Browser) -> None:
    runs = [site.do(start, site.q, nap, f"all {n}") for n in range(3)]
    since = site.do(get_run, site.q, runs[0].run_id).started_at
    window = since.strftime("%Y-%m-%dT%H:%M:%S.%f")
    page = site.sign_in(browser, "write")
    page.goto(f"/ui/runs?status=running&workflow=demo.nap&since={window}")
    expect(page.locator("tr[data-run]")).to_have_count(3)
    page.click("#all-matching")
    expect(page.locator("#how-many")).to_contain_text("3 runs")
    shot(site, page, "runs-confirm")
    page.click("button[data-action='Cancel 3 runs']")
    expect(page.locator("#done")).to_contain_text("Cancellation asked for: 3 runs.")
    for run in runs:
        wait_for(functools.partial(ended, site, run.run_id), timeout=30)
        assert site.do(get_run, site.q, run.run_id).status == "cancelled"

    read_only = site.sign_in(browser, "read")
    read_only.goto(f"/ui/runs/all/resume?status=cancelled&workflow=demo.nap&since={window}")
    expect(read_only.locator("#how-many")).to_contain_text("3 runs")
    expect(read_only.locator("button[data-action]")).to_have_count(0)
    refused = read_only.request.post(
        "/ui/runs/all/resume",
        form={"csrf": _csrf(read_only), "back": f"status=cancelled&since={window}"},
    )
    assert refused.status == 403
    assert site.do(get_run, site.q, runs[0].run_id).status == "cancelled"
    read_only.context.close()
    page.context.close()


def test_a_run_is_forked_from_a_step(site: Site, browser: Browser) -> None:
    marker = site.scratch / f"fork-{site.backend}"
    run = site.do(start, site.q, dispatch, "o-88", str(marker))
    wait_for(functools.partial(ended, site, run.run_id), timeout=60)
    page = site.sign_in(browser, "write")
    page.goto(f"/ui/runs/{run.run_id}")
    page.select_option("form.fork select[name=from_step]", "1")
    page.click("button[data-action=Fork]")
    expect(page).not_to_have_url(f"{site.url}/ui/runs/{run.run_id}")
    forked = page.url.rsplit("/", 1)[-1]
    wait_for(functools.partial(ended, site, forked), timeout=60)
    info = site.do(get_run, site.q, forked)
    assert info.status == "completed" and info.workflow == "demo.dispatch"
    assert info.steps[0].attempts == 2  # kept from the first run: not run again
    expect(page.locator("#result")).to_contain_text("label for o-88")
    page.context.close()


def test_a_failed_compensation_is_retried(site: Site, browser: Browser) -> None:
    marker = site.scratch / f"ledger-{site.backend}"
    run = site.do(start, site.q, transfer, f"acct-{site.backend}", str(marker))
    wait_for(
        lambda: site.do(get_run, site.q, run.run_id).status == "compensation_failed",
        timeout=60,
        message="the saga's compensation failed",
    )
    page = site.sign_in(browser, "write")
    page.goto("/ui/runs?status=compensation_failed&workflow=demo.transfer")
    expect(page.locator(f"tr[data-run='{run.run_id}']")).to_be_visible()
    page.click("#all-matching")
    expect(page.locator("#how-many")).to_contain_text("retries the failed compensation of")
    page.goto(f"/ui/runs/{run.run_id}")
    expect(page.locator("h1 .badge")).to_have_text("compensation_failed")
    marker.write_text("the ledger is back")
    page.click("button[data-action='Retry compensation']")
    expect(page.locator("h1 .badge")).to_have_text("compensated")
    assert site.do(get_run, site.q, run.run_id).status == "compensated"
    page.context.close()


def test_a_queue_page_shows_new_dead_letters_without_reload(site: Site, browser: Browser) -> None:
    (kept,) = site.do(bounce_mails, site.q, [f"kept-{site.backend}@example.com"])
    page = site.sign_in(browser, "write")
    page.goto(f"/ui/queues/{MAILS}")
    expect(page.locator("body")).to_have_attribute("data-live-state", "open")
    page.locator(f"tr[data-item='{kept}'] input[type=checkbox]").check()
    page.evaluate("window.notReloaded = true")

    (arrived,) = site.do(bounce_mails, site.q, [f"live-{site.backend}@example.com"])

    expect(page.locator(f"tr[data-item='{arrived}']")).to_be_visible()
    expect(page.locator(f"tr[data-item='{kept}'] input[type=checkbox]")).to_be_checked()
    assert page.evaluate("window.notReloaded") is True
    page.context.close()
