"""Signatures against the independent ``standardwebhooks`` package (PyPI)."""

from __future__ import annotations

import base64
import time
from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from querator.errors import InvalidArgument
from querator.webhooks import VerificationFailed, generate_secret, sign, verify
from querator.webhooks.signing import signature_header

BODY = b'{"id":"in_1","amount":1999}'


def headers(msg_id: str, stamp: int, signature: str) -> dict[str, str]:
    return {"webhook-id": msg_id, "webhook-timestamp": str(stamp), "webhook-signature": signature}


def test_our_signature_verifies_with_standardwebhooks() -> None:
    secret = generate_secret()
    stamp = int(time.time())
    got = Webhook(secret).verify(BODY, headers("msg_1", stamp, sign(secret, "msg_1", stamp, BODY)))
    assert got == {"id": "in_1", "amount": 1999}


def test_we_sign_exactly_like_standardwebhooks() -> None:
    secret = "whsec_" + base64.b64encode(bytes(range(32))).decode()
    stamp = 1_700_000_000
    theirs = Webhook(secret).sign(
        "msg_p5jXN8AQM9LWM0D4loKWxJek", datetime.fromtimestamp(stamp, UTC), BODY.decode()
    )
    assert sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", stamp, BODY) == theirs


def test_during_a_rotation_either_secret_verifies() -> None:
    old, new = generate_secret(), generate_secret()
    stamp = int(time.time())
    value = signature_header([new, old], "msg_2", stamp, BODY)
    assert len(value.split()) == 2
    for secret in (old, new):
        assert Webhook(secret).verify(BODY, headers("msg_2", stamp, value))
    with pytest.raises(WebhookVerificationError):
        Webhook(generate_secret()).verify(BODY, headers("msg_2", stamp, value))


def test_our_verify_accepts_what_standardwebhooks_signs() -> None:
    secret = generate_secret()
    now = datetime.now(UTC)
    signature = Webhook(secret).sign("msg_3", now, BODY.decode())
    got = verify(secret, headers("msg_3", int(now.timestamp()), signature), BODY)
    assert got == {"id": "in_1", "amount": 1999}
    upper = {k.upper(): v for k, v in headers("msg_3", int(now.timestamp()), signature).items()}
    assert verify(secret, upper, BODY.decode()) == got


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"body": BODY + b" "}, "no signature matches"),
        ({"msg_id": "msg_other"}, "no signature matches"),
        ({"secret": generate_secret()}, "no signature matches"),
        ({"skew": 301}, "outside the tolerance"),
        ({"skew": -301}, "outside the tolerance"),
        ({"drop": "webhook-signature"}, "missing header"),
        ({"drop": "webhook-id"}, "missing header"),
    ],
)
def test_our_verify_refuses_what_standardwebhooks_refuses(
    change: dict[str, object], why: str
) -> None:
    secret = generate_secret()
    stamp = int(time.time())
    signature = Webhook(secret).sign("msg_4", datetime.fromtimestamp(stamp, UTC), BODY.decode())
    sent = headers(str(change.get("msg_id", "msg_4")), stamp, signature)
    sent.pop(str(change.get("drop", "")), None)
    body = change.get("body", BODY)
    assert isinstance(body, bytes)
    checker = str(change.get("secret", secret))
    now = stamp + int(str(change.get("skew", 0)))
    with pytest.raises(VerificationFailed, match=why):
        verify(checker, sent, body, now=now)
    with pytest.raises(WebhookVerificationError):
        if "skew" in change:
            sent["webhook-timestamp"] = str(stamp - int(str(change["skew"])))
            sent["webhook-signature"] = Webhook(secret).sign(
                "msg_4",
                datetime.fromtimestamp(stamp - int(str(change["skew"])), UTC),
                BODY.decode(),
            )
        Webhook(checker).verify(body, sent)


@pytest.mark.parametrize(
    "secret",
    ["", "whsec_", "whsec_not base64!", "sk_abc", "whsec_" + base64.b64encode(b"short").decode()],
)
def test_malformed_secrets_are_invalid_arguments(secret: str) -> None:
    with pytest.raises(InvalidArgument, match="secret"):
        sign(secret, "msg_5", 1, BODY)
