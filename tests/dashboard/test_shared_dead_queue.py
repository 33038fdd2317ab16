"""Two queues sharing a dead queue on the dashboard (a real browser, SQLite and
PostgreSQL): each queue's page shows only its own dead letters, each with the
queue it came from, and "Requeue all" sends back only those; the dead queue's
item browser names each letter's source queue."""

from __future__ import annotations

import secrets

from playwright.sync_api import Browser, expect

from dashboard.sites import Site, reloaded
from querator import Item, Querator, QueueSettings

expect.set_options(timeout=20_000)


def _dead_lettered(q: Querator, base: str) -> tuple[str, str, str, list[str], list[str]]:
    """Queues ``{base}-a`` and ``{base}-b`` sharing ``{base}-dead``, two letters
    from a and one from b: (a, b, dead, a's letter ids, b's letter ids)."""
    a, b, dead = f"{base}-a", f"{base}-b", f"{base}-dead"
    q.create_queue(dead, QueueSettings())
    letters: dict[str, list[str]] = {}
    for name, count in ((a, 2), (b, 1)):
        q.create_queue(name, QueueSettings(dead_queue=dead, lease_timeout=30))
        q.produce(name, [Item(payload=f"{name} {n}".encode()) for n in range(count)])
        q.retry(name, q.lease(name, client_id="t", batch_size=count, timeout=5), dead=True)
        letters[name] = [item.id for item in q.dead_letters(name)]
    return a, b, dead, letters[a], letters[b]


def test_each_queue_shows_and_requeues_only_its_dead_letters(site: Site, browser: Browser) -> None:
    a, b, dead, of_a, of_b = site.do(_dead_lettered, site.q, f"shared-{secrets.token_hex(3)}")
    page = site.sign_in(browser, "write")
    page.goto(f"/ui/queues/{b}")
    expect(page.locator("table.dead tbody tr")).to_have_count(1)
    expect(page.locator(f"tr[data-item='{of_b[0]}'] td.source")).to_have_text(b)
    expect(page.locator("h2#dead")).to_contain_text("1 from this queue; 3 in")

    page.goto(f"/ui/queues/{a}")
    expect(page.locator("table.dead tbody tr")).to_have_count(2)
    for letter in of_a:
        expect(page.locator(f"tr[data-item='{letter}'] td.source")).to_have_text(a)
    expect(page.locator(f"tr[data-item='{of_b[0]}']")).to_have_count(0)
    page.on("dialog", lambda dialog: dialog.accept())
    with reloaded(page):
        page.click("button[data-action='Requeue all']")
    expect(page.locator("table.dead")).to_have_count(0)
    assert len(site.do(site.q.list_items, a, limit=10)) == 2
    assert site.do(site.q.list_items, b, limit=10) == []
    assert [item.id for item in site.do(site.q.dead_letters, b)] == of_b

    page.goto(f"/ui/queues/{dead}/items")
    expect(page.locator(f"tr[data-item='{of_b[0]}'] .source")).to_have_text(f"dead letter of {b}")
    page.context.close()
