"""Deliveries end to end: a real receiver, a real worker, every backend."""

from __future__ import annotations

import json
import logging
import threading
import time
from functools import partial

import pytest
from polling import wait_for

from querator import Querator
from querator.webhooks import DeliveryNotFound, DeliveryWorker, MessageNotFound, Outcome, Webhooks
from querator.webhooks.layout import DELIVERIES
from webhooks.helpers import FAST, check_signed, until_len
from webhooks.http_receiver import Received, Receiver


def test_a_message_is_delivered_signed_to_every_matching_endpoint(
    hooks: Webhooks, worker: DeliveryWorker, receiver: Receiver
) -> None:
    paid = hooks.add_endpoint(receiver.url("ok"), event_types=["invoice.*"])
    every = hooks.add_endpoint(receiver.url("ok"), headers={"x-tenant": "acme"})
    other = hooks.add_endpoint(receiver.url("ok"), event_types=["user.created"])

    message = hooks.send("invoice.paid", {"id": "in_1", "amount": 1999}, idempotency_key="k1")

    got = until_len(lambda: receiver.at("ok"), 2)
    assert len(got) == 2
    for request in got:
        assert request.headers["webhook-id"] == message.id
        assert json.loads(request.body) == {"id": "in_1", "amount": 1999}
    # each request carries the signature of its own endpoint's secret
    signed_by = []
    for request in got:
        for endpoint in (paid, every, other):
            try:
                assert check_signed(endpoint.secret, request) == {"id": "in_1", "amount": 1999}
            except Exception:
                continue
            signed_by.append(endpoint.id)
    assert sorted(signed_by) == sorted([paid.id, every.id])
    assert [r.headers.get("x-tenant") for r in got].count("acme") == 1
    assert set(message.endpoints) == {paid.id, every.id}
    log = until_len(lambda: hooks.attempts(message_id=message.id), 2)
    assert {a.outcome for a in log} == {Outcome.DELIVERED}
    assert all(a.status_code == 200 and a.response == "thanks" for a in log)


def test_the_same_idempotency_key_gives_the_same_message(
    hooks: Webhooks, worker: DeliveryWorker, receiver: Receiver
) -> None:
    hooks.add_endpoint(receiver.url("ok"))
    first = hooks.send("order.created", {"n": 1}, idempotency_key="order-1")
    again = hooks.send("order.created", {"n": 1}, idempotency_key="order-1")
    assert again.id == first.id and again.created_at == first.created_at
    wait_for(lambda: receiver.at("ok"))
    later = hooks.send("order.created", {"n": 1}, idempotency_key="order-1")
    assert later.id == first.id
    hooks.send("order.created", {"n": 2}, idempotency_key="order-2")
    wait_for(lambda: len(receiver.at("ok")) == 2)
    assert [r.headers["webhook-id"] for r in receiver.at("ok")].count(first.id) == 1


def test_failures_are_retried_with_the_same_webhook_id(
    hooks: Webhooks, worker: DeliveryWorker, receiver: Receiver
) -> None:
    endpoint = hooks.add_endpoint(receiver.url("flaky/2"))
    message = hooks.send("a.b", {"x": 1})
    wait_for(lambda: len(receiver.at("flaky/2")) == 3, timeout=10)
    assert {r.headers["webhook-id"] for r in receiver.at("flaky/2")} == {message.id}
    log = until_len(lambda: hooks.attempts(message_id=message.id), 3)
    assert [a.outcome for a in log] == [Outcome.RETRYING, Outcome.RETRYING, Outcome.DELIVERED]
    assert [a.status_code for a in log] == [500, 500, 200]
    assert [a.attempt for a in log] == [0, 1, 2]
    assert hooks.attempts(endpoint_id=endpoint.id)[0].outcome is Outcome.DELIVERED
    wait_for(lambda: hooks.get_endpoint(endpoint.id).failing_since is None)  # after the commit


def test_the_last_failure_dead_letters_and_redrive_delivers_again(
    hooks: Webhooks, worker: DeliveryWorker, receiver: Receiver
) -> None:
    endpoint = hooks.add_endpoint(receiver.url("flaky/3"))  # 500 three times per message
    first = hooks.send("a.b", {"x": 1})
    second = hooks.send("a.b", {"x": 2})
    third = hooks.send("a.b", {"x": 3})
    failed = until_len(hooks.failed, 3)
    assert {f.message_id for f in failed} == {first.id, second.id, third.id}
    assert all(f.reason == "HTTP 500" and f.attempts == 3 for f in failed)
    log = hooks.attempts(message_id=first.id)
    assert [a.outcome for a in log] == [Outcome.RETRYING, Outcome.RETRYING, Outcome.DEAD]
    wait_for(lambda: hooks.get_endpoint(endpoint.id).failing_since is not None)

    def delivered(message_id: str) -> list[Received]:
        return [r for r in receiver.at("flaky/3") if r.headers["webhook-id"] == message_id][3:]

    one = next(f for f in failed if f.message_id == first.id)
    assert hooks.redrive(one.id) == 1
    wait_for(lambda: delivered(first.id), timeout=10)
    wait_for(lambda: len(hooks.attempts(message_id=first.id)) == 4)
    assert [a.seq for a in hooks.attempts(message_id=first.id)] == [0, 1, 2, 3]
    assert hooks.attempts(message_id=first.id)[-1].outcome is Outcome.DELIVERED
    assert hooks.redrive(endpoint_id=endpoint.id) == 2
    wait_for(lambda: delivered(second.id) and delivered(third.id), timeout=10)
    assert hooks.failed() == []
    wait_for(lambda: hooks.get_endpoint(endpoint.id).failing_since is None)
    with pytest.raises(DeliveryNotFound):
        hooks.redrive(one.id)


def test_a_bounded_excerpt_of_the_answer_is_logged(
    hooks: Webhooks, worker: DeliveryWorker, receiver: Receiver
) -> None:
    hooks.add_endpoint(receiver.url("fail"))
    message = hooks.send("a.b", {})
    log = until_len(lambda: hooks.attempts(message_id=message.id), 3)
    assert [len(a.response) for a in log] == [1024] * 3
    assert log[0].response.startswith("boom ") and log[0].latency_ms > 0
    [dead] = hooks.failed()
    since = dead.failed_at
    assert hooks.redrive(since=since) == 1
    assert hooks.failed(since=since) == [] or hooks.failed(since=since)[0].id != dead.id


def test_410_gone_disables_the_endpoint(
    hooks: Webhooks, worker: DeliveryWorker, receiver: Receiver
) -> None:
    endpoint = hooks.add_endpoint(receiver.url("gone"))
    hooks.send("a.b", {})
    wait_for(lambda: hooks.get_endpoint(endpoint.id).disabled, timeout=10)
    assert "410" in hooks.get_endpoint(endpoint.id).disabled_reason
    [dead] = until_len(lambda: hooks.failed(endpoint_id=endpoint.id), 1)
    assert "410" in dead.reason
    assert len(receiver.at("gone")) == 1
    hooks.send("a.b", {})  # a disabled endpoint gets nothing new
    assert hooks.send("a.c", {}).endpoints == ()


def test_a_name_resolving_to_a_refused_address_disables_its_endpoint(
    q: Querator, hooks: Webhooks, receiver: Receiver
) -> None:
    # added where private targets were allowed; delivered by a worker where they are not
    endpoint = hooks.add_endpoint(receiver.url("ok").replace("127.0.0.1", "localhost"))
    strict = DeliveryWorker(q, FAST.model_copy(update={"allow_private": False}), endpoint_ttl=0.2)
    thread = threading.Thread(target=strict.run, daemon=True)
    thread.start()
    try:
        hooks.send("a.b", {})
        wait_for(lambda: hooks.get_endpoint(endpoint.id).disabled, timeout=10)
    finally:
        strict.stop()
        thread.join(timeout=20)
    reason = hooks.get_endpoint(endpoint.id).disabled_reason
    assert "target was refused" in reason and "loopback" in reason
    assert "--allow-private" in reason
    [dead] = until_len(lambda: hooks.failed(endpoint_id=endpoint.id), 1)
    assert "refused" in dead.reason
    assert receiver.at("ok") == []
    [attempt] = hooks.attempts(endpoint_id=endpoint.id)
    assert attempt.outcome is Outcome.DEAD and "refused" in attempt.error


def test_429_retry_after_is_honoured(hooks: Webhooks, receiver: Receiver) -> None:
    receiver.retry_after = "1"
    hooks.add_endpoint(receiver.url("limited"))
    hooks.send("a.b", {})
    running = DeliveryWorker(hooks.q, hooks.settings, endpoint_ttl=0.2)
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    try:
        got = until_len(lambda: receiver.at("limited"), 2)
        assert got[1].at - got[0].at >= 0.9  # the schedule says 0.1 s; Retry-After says 1 s
    finally:
        running.stop()
        thread.join(timeout=10)


@pytest.mark.parametrize("backend_name", ["sqlite"], indirect=True)
def test_a_rotated_secret_signs_with_both_during_the_grace_period(
    hooks: Webhooks, worker: DeliveryWorker, receiver: Receiver
) -> None:
    endpoint = hooks.add_endpoint(receiver.url("ok"))
    old = endpoint.secret
    rotated = hooks.rotate_secret(endpoint.id, grace=3600)
    assert rotated.secret != old
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # the worker's copy is at most endpoint_ttl old
        hooks.send("a.b", {"n": time.monotonic()})
        got = wait_for(lambda: receiver.at("ok")[-1:])[0]
        if len(got.headers["webhook-signature"].split()) == 2:
            break
    assert check_signed(old, got) and check_signed(rotated.secret, got)


def test_an_endpoint_failing_for_too_long_is_disabled_with_the_reason(
    q: Querator, receiver: Receiver
) -> None:
    settings = FAST.model_copy(update={"disable_after": 0.3, "schedule": (0.0,) + (0.2,) * 20})
    hooks = Webhooks(q, settings)
    endpoint = hooks.add_endpoint(receiver.url("fail"))
    hooks.send("a.b", {})
    worker = DeliveryWorker(q, settings, endpoint_ttl=0.2)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: hooks.get_endpoint(endpoint.id).disabled, timeout=15)
    finally:
        worker.stop()
        thread.join(timeout=10)
    disabled = hooks.get_endpoint(endpoint.id)
    assert "failed since" in disabled.disabled_reason
    assert disabled.failing_since is not None
    [dead] = until_len(hooks.failed, 1)
    assert dead.reason.startswith("every delivery failed since")
    assert hooks.enable_endpoint(endpoint.id).failing_since is None


def test_kept_records_expire_after_the_retention(q: Querator) -> None:
    hooks = Webhooks(q, FAST.model_copy(update={"retention": 0.5}))
    message = hooks.send("a.b", {"x": 1})
    assert hooks.get_message(message.id) == message

    def expired() -> bool:
        q.run_maintenance()
        try:
            hooks.get_message(message.id)
        except MessageNotFound:
            return True
        return False

    wait_for(expired, timeout=10)


def test_secrets_never_reach_the_logs(
    hooks: Webhooks, worker: DeliveryWorker, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    endpoint = hooks.add_endpoint(receiver.url("gone"))
    rotated = hooks.rotate_secret(endpoint.id, grace=60)
    hooks.send("a.b", {})
    wait_for(lambda: hooks.get_endpoint(endpoint.id).disabled, timeout=10)
    wait_for(lambda: "disabling endpoint" in caplog.text)
    shown = caplog.text + repr(hooks.get_endpoint(endpoint.id)) + repr(hooks.list_endpoints())
    for secret in (endpoint.secret, rotated.secret):
        assert secret.removeprefix("whsec_") not in shown


@pytest.mark.parametrize("backend_name", ["memory", "sqlite"], indirect=True)
def test_stop_lets_attempts_in_flight_finish_or_gives_them_back(
    q: Querator, hooks: Webhooks, receiver: Receiver
) -> None:
    slow = hooks.add_endpoint(receiver.url("slow/500"))
    message = hooks.send("a.b", {})
    worker = DeliveryWorker(q, FAST, shutdown_grace=10.0)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    wait_for(lambda: receiver.at("slow/500"))  # the attempt is in flight
    worker.stop()
    thread.join(timeout=15)
    [attempt] = hooks.attempts(message_id=message.id)  # finished and committed before run returned
    assert attempt.outcome is Outcome.DELIVERED and attempt.endpoint_id == slow.id

    hooks.update_endpoint(slow.id, url=receiver.url("hang"))
    hooks.send("a.b", {})
    hurried = DeliveryWorker(q, FAST, shutdown_grace=0.2)
    thread = threading.Thread(target=hurried.run, daemon=True)
    thread.start()
    wait_for(lambda: receiver.hanging == 1)
    hurried.stop()
    thread.join(timeout=15)
    assert not thread.is_alive()
    stats = q.stats(DELIVERIES)
    assert (stats.total, stats.leased) == (1, 0)  # given back, leasable now: not left to expire


@pytest.mark.parametrize("backend_name", ["memory", "sqlite"], indirect=True)
def test_an_attempt_longer_than_the_lease_keeps_its_lease(q: Querator, receiver: Receiver) -> None:
    settings = FAST.model_copy(update={"timeout": 10.0})
    hooks = Webhooks(q, settings)  # leases of 1.5 s: the 4 s attempt needs renewals
    hooks.add_endpoint(receiver.url("slow/4000"))
    message = hooks.send("a.b", {})
    worker = DeliveryWorker(q, settings, concurrency=4)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        [attempt] = until_len(lambda: hooks.attempts(message_id=message.id), 1, timeout=15)
    finally:
        worker.stop()
        thread.join(timeout=15)
    assert attempt.outcome is Outcome.DELIVERED and attempt.latency_ms >= 4000
    assert len(receiver.at("slow/4000")) == 1  # never re-leased and sent twice meanwhile


@pytest.mark.parametrize("backend_name", ["memory"], indirect=True)
def test_items_waiting_for_room_keep_their_leases(q: Querator, receiver: Receiver) -> None:
    settings = FAST.model_copy(update={"timeout": 10.0})
    hooks = Webhooks(q, settings)  # leases of 1.5 s; the third item waits about 2.4 s
    hooks.add_endpoint(receiver.url("slow/1200"), max_in_flight=1)
    sent = [hooks.send("a.b", {"n": n}) for n in range(3)]
    worker = DeliveryWorker(q, settings)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        for message in sent:
            until_len(partial(hooks.attempts, message_id=message.id), 1, timeout=15)
    finally:
        worker.stop()
        thread.join(timeout=15)
    assert sorted(r.headers["webhook-id"] for r in receiver.at("slow/1200")) == sorted(
        m.id for m in sent
    )  # each sent once: no lease expired while its item waited
