"""The pure parts: URL and address checks, the retry schedule, Retry-After,
the per-endpoint gate, the outcome of an attempt."""

from __future__ import annotations

import ipaddress
import random
from datetime import UTC, datetime, timedelta

import pytest

from querator.errors import InvalidArgument
from querator.webhooks import Outcome, WebhookSettings
from querator.webhooks.delivery import Result
from querator.webhooks.endpoints import Endpoint, SecretEntry, matches
from querator.webhooks.errors import TargetRefused
from querator.webhooks.gates import Gate
from querator.webhooks.layout import DEAD, DELIVERIES, Delivery
from querator.webhooks.outcomes import decide
from querator.webhooks.schedule import next_delay, parse_retry_after
from querator.webhooks.signing import generate_secret
from querator.webhooks.targets import check_url, pick, refusal


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "cloud metadata"),
        ("169.254.1.1", "link-local, where cloud metadata services live"),
        ("fe80::1", "link-local"),
        ("fd00:ec2::254", "cloud metadata"),
        ("fc00::1", "private"),
        ("::ffff:127.0.0.1", "IPv4-mapped form of 127.0.0.1, loopback"),
        ("0.0.0.0", "private"),
        ("2002:7f00:1::", "6to4 form of 127.0.0.1, loopback"),
        ("2002:a00:1::1", "6to4 form of 10.0.0.1, private"),
        ("2002:a9fe:a9fe::", "6to4 form of 169.254.169.254, cloud metadata"),
        ("2002:5db8:d70e::1", None),  # 6to4 of a public address
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo tunnel"),
        ("64:ff9b::7f00:1", "NAT64 form of 127.0.0.1, loopback"),
        ("64:ff9b::c0a8:101", "NAT64 form of 192.168.1.1, private"),
        ("64:ff9b:1::a00:1", "NAT64 form of 10.0.0.1, private"),
        ("64:ff9b::5db8:d70e", None),  # DNS64's answer for a public address
        ("::7f00:1", "IPv4-compatible form of 127.0.0.1, loopback"),
        ("::5db8:d70e", "IPv4-compatible (deprecated)"),
        ("::ffff:0:a00:1", "IPv4-translated form of 10.0.0.1, private"),
        ("169.254.170.2", "cloud metadata"),
        ("168.63.129.16", "cloud metadata"),
        ("fd00:ec2::23", "cloud metadata"),
        ("100.64.0.1", "not globally routable"),
        ("224.0.0.1", "multicast"),
        ("93.184.215.14", None),
        ("2606:4700::1111", None),
    ],
)
def test_addresses_refused_and_allowed(address: str, why: str | None) -> None:
    assert refusal(ipaddress.ip_address(address)) == why


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", None),
        ("::1", None),
        ("10.1.2.3", None),
        ("fc00::1", None),
        ("2002:7f00:1::", None),
        ("169.254.169.254", "cloud metadata"),
        ("169.254.170.2", "cloud metadata"),
        ("169.254.1.1", "link-local, where cloud metadata services live"),
        ("100.100.100.200", "cloud metadata"),
        ("fd00:ec2::254", "cloud metadata"),
        ("::ffff:169.254.169.254", "IPv4-mapped form of 169.254.169.254, cloud metadata"),
        ("64:ff9b::a9fe:a9fe", "NAT64 form of 169.254.169.254, cloud metadata"),
        ("2002:a9fe:a9fe::1", "6to4 form of 169.254.169.254, cloud metadata"),
    ],
)
def test_allow_private_never_admits_cloud_metadata(address: str, why: str | None) -> None:
    assert refusal(ipaddress.ip_address(address), allow_private=True) == why


def test_a_refusal_says_whether_allow_private_would_admit_it() -> None:
    target = check_url("http://db.internal:8080/hook")
    with pytest.raises(TargetRefused, match=r"loopback\); refused: allow .* --allow-private"):
        pick(target, [ipaddress.ip_address("127.0.0.1")], allow_private=False)
    for allow in (False, True):
        with pytest.raises(TargetRefused, match="never allowed, even with --allow-private"):
            pick(target, [ipaddress.ip_address("169.254.169.254")], allow_private=allow)
    public = ipaddress.ip_address("93.184.215.14")
    with pytest.raises(TargetRefused, match=r"10\.0\.0\.1"):  # every address must pass
        pick(target, [public, ipaddress.ip_address("10.0.0.1")], allow_private=False)
    assert pick(target, [public], allow_private=False) == public


@pytest.mark.parametrize(
    "url",
    [
        "",
        "example.com/hook",
        "ftp://example.com/",
        "http://",
        "https://user:pw@example.com/",
        "https://example.com:99999/",
        "https://exa mple.com/",
        "https://example.com/#frag",
        42,
    ],
)
def test_malformed_urls_are_invalid(url: object) -> None:
    with pytest.raises(InvalidArgument, match="url"):
        check_url(url)


def test_url_parts() -> None:
    target = check_url("https://[2606:4700::1111]:8443/in?x=1")
    assert (target.host, target.port, target.path) == ("2606:4700::1111", 8443, "/in?x=1")
    assert check_url("http://example.com").path == "/"


def test_event_type_filters() -> None:
    assert matches(None, "a.b")
    assert matches(("a.*",), "a.b.c") and not matches(("a.*",), "ab.c")
    assert matches(("*",), "x") and matches(("x", "y"), "y") and not matches(("x",), "x.y")


def test_the_schedule_with_jitter_and_retry_after() -> None:
    settings = WebhookSettings(schedule=(0, 10, 100), jitter=0.5)
    rand = random.Random(7)
    delays = [next_delay(settings, 0, rand=rand) for _ in range(200)]
    assert all(d is not None and 5 <= d <= 15 for d in delays)
    assert len({round(d or 0, 3) for d in delays}) > 100  # spread, not one value
    assert next_delay(settings, 2) is None  # that was the last attempt
    assert next_delay(settings, 1, retry_after=3) == 3
    assert next_delay(settings, 1, retry_after=10**9) == settings.max_retry_after
    assert WebhookSettings().schedule == (0, 5, 300, 1800, 7200, 18000, 36000, 36000)


def test_retry_after_parsing() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_retry_after("120", now) == 120
    assert parse_retry_after("Thu, 01 Jan 2026 00:01:00 GMT", now) == 60
    assert parse_retry_after("soon", now) is None and parse_retry_after(None) is None


def endpoint(**changes: object) -> Endpoint:
    now = datetime.now(UTC)
    fields: dict[str, object] = {
        "id": "ep_1",
        "url": "https://example.com/",
        "secrets": (SecretEntry(secret=generate_secret()),),
        "created_at": now,
        "updated_at": now,
    }
    return Endpoint.model_validate({**fields, **changes})


def test_a_full_endpoint_defers_instead_of_holding() -> None:
    gate, ep = Gate(), endpoint(max_in_flight=2)
    assert gate.admit(ep, 0.0, None, 1) is None and gate.admit(ep, 0.0, None, 2) is None
    first = gate.admit(ep, 30.0, None, 3)  # two attempts hanging for 30 s
    assert first is not None and first >= 30 and not gate.may_wait(first, 30.0, 30.0, first=True)
    assert gate.deferring(ep, 30.0, first) == first
    second = gate.admit(ep, 30.0, None, 4)
    assert second is not None and gate.deferring(ep, 30.0, second) > first  # spread behind
    gate.done(1, 31.0, None)
    assert gate.admit(ep, 31.0, None, 5) is None


def test_a_fast_endpoint_feeds_waiters_from_memory() -> None:
    gate, ep = Gate(), endpoint(max_in_flight=1)
    assert gate.admit(ep, 0.0, None, 1) is None
    gate.done(1, 0.002, None)  # answers in 2 ms
    assert gate.admit(ep, 0.01, None, 2) is None
    wait = gate.admit(ep, 0.011, None, 3)
    assert wait is not None and wait < 0.01 and gate.may_wait(wait, 0.011, 0.011, first=True)
    assert gate.may_wait(wait, 0.5, 0.011, first=False)  # it made progress at 0.002
    assert not gate.may_wait(wait, 2.5, 0.011, first=False)  # stalled for 2 s
    gate.waiting = 2_000  # 2,000 ahead at 2 ms each, over one slot: about 4 s
    late = gate.admit(ep, 0.011, None, 4)
    assert late is not None and late > 2 and not gate.may_wait(late, 0.011, 0.011, first=True)


def test_rate_limit_spaces_deliveries() -> None:
    gate, ep = Gate(), endpoint(rate_limit=2.0)
    admitted = [gate.admit(ep, 0.0, None, i) is None for i in range(5)]
    assert admitted.count(True) == 2  # a one-second burst
    later = gate.admit(ep, 0.0, None, 9)
    assert later is not None and later >= 0.5


def test_an_ordering_key_waits_for_the_one_before() -> None:
    gate, ep = Gate(), endpoint(ordered=True)
    assert gate.admit(ep, 0.0, "k", 1) is None
    assert gate.admit(ep, 0.0, "k", 2) is not None and gate.admit(ep, 0.0, "j", 3) is None
    gate.done(1, 1.0, "k", hold=60.0)  # failed: retry in 60 s
    wait = gate.admit(ep, 2.0, "k", 4)
    assert wait is not None and wait >= 58
    gate.done(4, 2.0, "k")


def delivery(attempt: int = 0) -> Delivery:
    return Delivery(
        message_id="msg_1", endpoint_id="ep_1", event_type="a", body="{}", attempt=attempt
    )


def test_outcomes() -> None:
    settings = WebhookSettings(schedule=(0, 1, 1), jitter=0, disable_after=3600)
    now = datetime.now(UTC)
    ok = decide(settings, endpoint(), delivery(), Result(204, 0.01), now)
    assert ok.outcome is Outcome.DELIVERED and set(ok.produce) == {"querator.webhooks.attempts"}
    retry = decide(settings, endpoint(), delivery(), Result(500, 0.01), now)
    assert retry.outcome is Outcome.RETRYING and retry.delay == 1 and DELIVERIES in retry.produce
    assert retry.failing is True
    last = decide(settings, endpoint(), delivery(2), Result(None, 1, error="timed out"), now)
    assert last.outcome is Outcome.DEAD and DEAD in last.produce
    gone = decide(settings, endpoint(), delivery(), Result(410, 0.01), now)
    assert gone.outcome is Outcome.DEAD and gone.disable
    limited = decide(settings, endpoint(), delivery(), Result(429, 0.01, retry_after="7"), now)
    assert limited.delay == 7 and limited.pause == 7
    unavailable = decide(settings, endpoint(), delivery(), Result(503, 0.01, retry_after="9"), now)
    assert unavailable.delay == 9 and unavailable.pause == 9
    plain = decide(settings, endpoint(), delivery(), Result(500, 0.01, retry_after="9"), now)
    assert plain.delay == 1 and plain.pause is None  # only 429 and 503 pause
    redirect = decide(settings, endpoint(), delivery(), Result(302, 0.01), now)
    assert redirect.outcome is Outcome.RETRYING
    old = endpoint(failing_since=now - timedelta(hours=2))
    tired = decide(settings, old, delivery(), Result(500, 0.01), now)
    assert tired.disable is not None and "failed since" in tired.disable
    assert tired.outcome is Outcome.DEAD and DEAD in tired.produce
    healed = decide(settings, old, delivery(), Result(200, 0.01), now)
    assert healed.failing is False and healed.disable is None
    refused = decide(settings, endpoint(), delivery(), Result(None, 0, "", "no", refused=True), now)
    assert refused.outcome is Outcome.DEAD and DEAD in refused.produce
    assert refused.disable == "its target was refused: no"
