"""The store the dashboard's browser tests look at: the order-fulfilment saga
of ``examples/sagas/order_fulfilment.py`` and the approval workflow of
``examples/workflows_hello.py`` served by a worker thread, two
workflows a test can hold (a gate that opens when a file appears, a long
durable nap), a mail queue with dead letters, and a task that fails until a
file appears."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

from querator import Item, Querator, QueueSettings
from querator.tasks import task
from querator.workflows import (
    DurableFunction,
    RetryPolicy,
    Worker,
    close_stream,
    recv,
    report_progress,
    saga,
    set_event,
    sleep,
    step,
    workflow,
    write_stream,
)

ROOT = Path(__file__).resolve().parent.parent.parent
MAILS = "shop.mails"
MAILS_DEAD = "shop.mails-dead"
WORKER_ID = "shop-worker-1"
"""The client id of the site's worker (the Workers page shows it)."""
GATE_SECONDS = 120.0
"""How long the gate step waits for its file before it gives up."""


def _example(name: str, relative: str) -> ModuleType:
    """The example at ``relative`` (under the repository), imported once per process."""
    if name not in sys.modules:
        path = ROOT / relative
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def order_example() -> ModuleType:
    """``examples/sagas/order_fulfilment.py``, imported once per process."""
    return _example("order_fulfilment_example", "examples/sagas/order_fulfilment.py")


def hello_example() -> ModuleType:
    """``examples/workflows_hello.py`` (its ``hello.approval`` publishes a
    status, logs to a stream and waits for a message), imported once per process."""
    return _example("workflows_hello_example", "examples/workflows_hello.py")


@step(name="demo.wait_for_file")
def wait_for_file(path: str) -> str:
    """Return once ``path`` exists (the test opens the gate by creating it)."""
    report_progress({"waiting_for": Path(path).name})
    deadline = time.monotonic() + GATE_SECONDS
    while not Path(path).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear")
        time.sleep(0.02)
    return Path(path).read_text()


def open_gate(path: Path, text: str) -> None:
    """Open the gate at ``path`` with ``text``, atomically: the file appears
    whole (written beside it, then renamed), so the step never reads it while
    it is still empty."""
    ajar = path.with_name(path.name + ".ajar")
    ajar.write_text(text)
    ajar.replace(path)


@workflow(name="demo.gate")
def gate(path: str) -> dict[str, str]:
    """A run that stays running until its file appears."""
    return {"opened_with": wait_for_file(path)}


@workflow(name="demo.two_gates")
def two_gates(first: str, second: str) -> list[str]:
    """A run of two slow steps: each waits for its own file."""
    return [wait_for_file(first), wait_for_file(second)]


@workflow(name="demo.nap")
def nap(note: str) -> str:
    """A run that sleeps (a durable timer) for an hour."""
    sleep(3600)
    return note


@workflow(name="demo.unserved")
def unserved(note: str) -> str:
    """A workflow no worker of the site serves: its schedule is an orphan."""
    return note


@workflow(name="demo.publisher")
def publisher(note: str) -> str:
    """A run that publishes ``note`` (an event and a stream's value), reads the
    first message on ``approval``, says so, then naps for an hour."""
    set_event("status", {"note": note, "state": "waiting for approval"})
    write_stream("log", note)
    write_stream("log", {"step": 2, "text": "asked for approval"})
    close_stream("log")
    approval = recv("approval", timeout=3600)
    set_event("status", {"note": note, "state": "approved", "by": approval})
    sleep(3600)
    return note


@step(name="demo.flaky_lookup", retry=RetryPolicy(max_attempts=3, initial=0.05, jitter=False))
def flaky_lookup(marker: str) -> str:
    """Fails its first attempt (it leaves ``marker`` behind), then returns."""
    if not Path(marker).exists():
        Path(marker).write_text("tried once")
        raise ConnectionError("the address book did not answer")
    return "found"


@workflow(name="demo.label")
def label(order: str) -> str:
    """A child run: prints a shipping label."""
    return f"label for {order}"


@workflow(name="demo.dispatch")
def dispatch(order: str, marker: str) -> dict[str, str]:
    """A parent run: a step that is retried once, then a child run."""
    address = flaky_lookup(marker)
    return {"address": address, "label": label(order)}


@step(name="demo.debit")
def debit(account: str, marker: str) -> str:
    """Takes money (the saga's first step)."""
    return f"debited {account}"


@debit.compensate(name="demo.credit_back", retry=None)
def credit_back(account: str, marker: str, debited: str) -> None:
    """Gives it back; fails while ``marker`` is missing (one attempt: the saga
    ends ``compensation_failed`` until it is retried)."""
    if not Path(marker).exists():
        raise ConnectionError("the ledger is down")


@step(name="demo.send_money", retry=None)
def send_money(account: str) -> str:
    """Always refused: the saga compensates."""
    raise PermissionError(f"{account} is frozen")


@saga(name="demo.transfer")
def transfer(account: str, marker: str) -> str:
    """A saga whose compensation fails until its marker exists."""
    debit(account, marker)
    return send_money(account)


def worker(q: Querator) -> Worker:
    """A worker serving the order saga and the demo workflows."""
    shop = order_example()
    functions = [shop.fulfil, shop.reserve_stock, shop.charge_payment, shop.create_shipment]
    demo: list[DurableFunction] = [gate, two_gates, wait_for_file, nap, flaky_lookup, publisher]
    demo += [label, dispatch]
    demo += [debit, send_money, transfer, hello_example().approval]
    return Worker(q, [*functions, *demo, sync_crm], client_id=WORKER_ID)


@task(name="demo.sync_crm", retry=None, keep_result=True)
def sync_crm(customer: str, consent_file: str) -> str:
    """A task that fails (once, for good: no retries) until its consent file exists."""
    if not Path(consent_file).exists():
        raise PermissionError(f"no consent from {customer} yet")
    return f"{customer} synced"


def create_queues(q: Querator) -> None:
    """The queues of the shop (the saga's own, and the mails with their dead letters)."""
    shop = order_example()
    q.create_queue(shop.QUEUE, QueueSettings(lease_timeout=5.0, expire_timeout=86_400))
    q.create_queue(MAILS_DEAD, QueueSettings(lease_timeout=30, expire_timeout=86_400))
    settings = QueueSettings(
        lease_timeout=30, expire_timeout=86_400, max_attempts=3, dead_queue=MAILS_DEAD
    )
    q.create_queue(MAILS, settings)


def bounce_mails(q: Querator, recipients: list[str]) -> list[str]:
    """Produce a mail per recipient and dead-letter each (as after its last
    failed attempt); the ids of the dead letters."""
    items = [
        Item(payload=f'{{"to": "{to}", "template": "receipt"}}'.encode(), kind="mail.receipt")
        for to in recipients
    ]
    produced = q.produce(MAILS, items)
    leased = q.lease(MAILS, client_id="mailer-1", batch_size=len(items), timeout=5)
    assert sorted(item.id for item in leased) == sorted(produced), (leased, produced)
    q.retry(MAILS, leased, dead=True)
    dead = {item.source_id: item.id for item in q.list_items(MAILS_DEAD, limit=1000)}
    return [dead[item_id] for item_id in produced]


def deliver_mails(q: Querator) -> int:
    """Lease and complete every mail waiting (a mailer that got through); how many."""
    leased = q.lease(MAILS, client_id="mailer-2", batch_size=1000, timeout=5)
    q.complete(MAILS, leased)
    return len(leased)
