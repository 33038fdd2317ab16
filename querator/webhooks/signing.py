"""Standard Webhooks signatures: secrets, signing and verifying (pure code).

A secret is ``whsec_`` followed by the base64 of 24 to 64 random bytes; the
key is those bytes. A webhook carries three headers:

- ``webhook-id``: the message id (the same on every attempt: receivers
  deduplicate by it);
- ``webhook-timestamp``: Unix seconds when the attempt was signed;
- ``webhook-signature``: ``v1,`` + base64(HMAC-SHA256(key, f"{id}.{timestamp}.{body}")),
  one per valid secret, separated by spaces (two during a rotation's grace period).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import secrets
import time
from collections.abc import Iterable, Mapping
from typing import Any

from querator.errors import InvalidArgument
from querator.webhooks.errors import VerificationFailed

__all__ = ["generate_secret", "sign", "signature_header", "verify"]

PREFIX = "whsec_"
KEY_BYTES = 32
"""Random bytes in a generated secret."""
MIN_KEY, MAX_KEY = 24, 64
DEFAULT_TOLERANCE = 300.0
"""Seconds a receiver accepts between a webhook's timestamp and its own clock."""


def generate_secret() -> str:
    """A new random ``whsec_…`` secret."""
    return PREFIX + base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()


def secret_key(secret: str, field: str = "secret") -> bytes:
    """The key bytes of a ``whsec_…`` secret; InvalidArgument when malformed."""
    if not isinstance(secret, str) or not secret.startswith(PREFIX):
        raise InvalidArgument(field, "must be a string starting with 'whsec_'")
    try:
        key = base64.b64decode(secret[len(PREFIX) :], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidArgument(field, "is not valid base64 after 'whsec_'") from exc
    if not MIN_KEY <= len(key) <= MAX_KEY:
        raise InvalidArgument(field, f"must hold {MIN_KEY} to {MAX_KEY} key bytes, got {len(key)}")
    return key


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,<base64>`` signature of ``body`` sent as ``msg_id`` at ``timestamp``."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signature_header(secrets_: Iterable[str], msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value: one signature per secret, space-separated."""
    return " ".join(sign(secret, msg_id, timestamp, body) for secret in secrets_)


def _header(headers: Mapping[str, str], name: str) -> str:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    raise VerificationFailed(f"missing header {name!r}")


def verify(
    secret: str,
    headers: Mapping[str, str],
    body: bytes | str,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> Any:
    """Check a received webhook and return its JSON payload.

    ``headers`` are the request's headers (any mapping; names are matched
    without regard to case), ``body`` the raw request body, exactly as
    received. Raises :class:`~querator.webhooks.errors.VerificationFailed`
    when a header is missing, the timestamp is more than ``tolerance``
    seconds away from ``now`` (default: the clock), or no ``v1`` signature
    matches ``secret``; :class:`~querator.errors.InvalidArgument` when
    ``secret`` is not a ``whsec_…`` secret.
    """
    key = secret_key(secret)
    raw = body.encode() if isinstance(body, str) else bytes(body)
    msg_id = _header(headers, "webhook-id")
    stamp = _header(headers, "webhook-timestamp")
    given = _header(headers, "webhook-signature")
    try:
        timestamp = int(stamp)
    except ValueError:
        raise VerificationFailed(f"webhook-timestamp {stamp!r} is not an integer") from None
    clock = time.time() if now is None else now
    if not math.isfinite(tolerance) or abs(clock - timestamp) > tolerance:
        raise VerificationFailed(f"webhook-timestamp {timestamp} is outside the tolerance")
    signed = f"{msg_id}.{timestamp}.".encode() + raw
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest())
    for entry in given.split():
        version, _, signature = entry.partition(",")
        if version == "v1" and hmac.compare_digest(signature.encode(), expected):
            try:
                return json.loads(raw)
            except ValueError:
                raise VerificationFailed("the body is not JSON") from None
    raise VerificationFailed("no signature matches the secret")
