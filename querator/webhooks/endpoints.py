"""Endpoints: where messages go, with which secret, filter and limits (pure code)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, TypedDict

from pydantic import BaseModel, ConfigDict, Field, field_validator

from querator.model_bases import InputModel
from querator.queue.record_store import Versioned
from querator.webhooks.signing import secret_key
from querator.webhooks.targets import check_url

__all__ = ["Endpoint", "EndpointOptions", "SecretEntry", "check_event_type", "matches"]

EVENT_TYPE = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
FILTER = re.compile(r"^([A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*)(\.\*)?$|^\*$")
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
RESERVED_HEADERS = frozenset(
    {"host", "content-type", "content-length", "transfer-encoding", "connection", "user-agent"}
)
MAX_EVENT_TYPE = 256


def check_event_type(value: object) -> str:
    """An event type name: dot-separated words of letters, digits, ``_``, ``-``."""
    if not isinstance(value, str) or len(value) > MAX_EVENT_TYPE or not EVENT_TYPE.match(value):
        raise ValueError(
            f"{value!r} must be dot-separated words of letters, digits, '_' or '-' "
            f"(at most {MAX_EVENT_TYPE} characters)"
        )
    return value


def matches(event_types: tuple[str, ...] | None, event_type: str) -> bool:
    """Whether an endpoint with filter ``event_types`` (None: every type) gets
    ``event_type``. Entries are exact types, ``prefix.*`` or ``*``."""
    if event_types is None:
        return True
    for entry in event_types:
        if entry in ("*", event_type):
            return True
        if entry.endswith(".*") and event_type.startswith(entry[:-1]):
            return True
    return False


def _check_headers(value: dict[str, str]) -> dict[str, str]:
    for name, text in value.items():
        if not HEADER_NAME.match(name):
            raise ValueError(f"{name!r} is not a valid header name")
        lowered = name.lower()
        if lowered in RESERVED_HEADERS or lowered.startswith("webhook-"):
            raise ValueError(f"{name!r} is set by the delivery itself")
        if any(ch in text for ch in "\r\n\x00"):
            raise ValueError(f"the value of {name!r} must not contain CR, LF or NUL")
    return value


class EndpointFields(TypedDict, total=False):
    """The keyword options of ``add_endpoint`` (sync and async; defaults and checks:
    :class:`EndpointOptions`)."""

    description: str
    event_types: list[str] | None
    """Exact types, ``prefix.*`` or ``*``; None: everything."""
    secret: str | None
    """A ``whsec_`` secret (default: generated)."""
    rate_limit: float | None
    """Deliveries per second, per delivery worker (default: none)."""
    max_in_flight: int
    """Attempts at once, per delivery worker (default 10)."""
    headers: dict[str, str] | None
    """Sent with every delivery."""
    ordered: bool
    """Deliver the messages of one ``ordering_key`` one at a time."""


class EndpointOptions(InputModel):
    """What a user may set on an endpoint (checked on add and update)."""

    url: str
    description: str = Field(default="", max_length=2_000)
    event_types: tuple[str, ...] | None = Field(default=None, min_length=1, max_length=256)
    rate_limit: float | None = Field(default=None, gt=0, le=100_000)
    max_in_flight: int = Field(default=10, ge=1, le=1_000)
    headers: dict[str, str] = Field(default_factory=dict, max_length=64)
    ordered: bool = False

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        check_url(value)
        return value

    @field_validator("event_types")
    @classmethod
    def _filter(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for entry in value or ():
            if not isinstance(entry, str) or len(entry) > MAX_EVENT_TYPE or not FILTER.match(entry):
                raise ValueError(f"{entry!r} must be an event type, 'prefix.*' or '*'")
        return value

    _headers = field_validator("headers")(_check_headers)


class SecretEntry(BaseModel):
    """A signing secret and, for an old one kept during a rotation, when it stops."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    secret: str = Field(repr=False)
    expires_at: datetime | None = None
    """None for the current secret."""

    @field_validator("secret")
    @classmethod
    def _well_formed(cls, value: str) -> str:
        secret_key(value)
        return value


Secrets = Annotated[tuple[SecretEntry, ...], Field(repr=False, min_length=1)]


class Endpoint(Versioned):
    """An endpoint as stored: its options, secrets and state.

    Frozen; fields it does not know are ignored, so an older process reads a
    newer one's endpoints.

    ``secret`` is the current signing secret; during a rotation's grace
    period the previous one is still in ``secrets`` and webhooks carry both
    signatures. Secrets are left out of ``repr`` (and so out of logs).
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str
    url: str
    description: str = ""
    event_types: tuple[str, ...] | None = None
    """Event types sent here (``prefix.*`` and ``*`` allowed); None: every type."""
    rate_limit: float | None = None
    """Most deliveries per second per delivery worker; None: no limit."""
    max_in_flight: int = 10
    """Most attempts in progress at once per delivery worker."""
    headers: dict[str, str] = {}
    """Extra headers sent with every delivery."""
    ordered: bool = False
    """Deliver messages of the same ``ordering_key`` one at a time, in order."""
    secrets: Secrets
    disabled: bool = False
    disabled_reason: str = ""
    failing_since: datetime | None = None
    """When the current run of failures began (None: the last attempt succeeded)."""
    created_at: datetime
    updated_at: datetime

    @property
    def secret(self) -> str:
        """The current signing secret (``whsec_…``)."""
        return self.secrets[0].secret

    def signing_secrets(self, now: datetime) -> list[str]:
        """Secrets to sign with at ``now``: the current one and unexpired old ones."""
        return [s.secret for s in self.secrets if s.expires_at is None or s.expires_at > now]
