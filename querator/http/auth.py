"""Bearer tokens of the HTTP API: created, listed and revoked from the CLI,
stored hashed as records of the internal queue ``querator.tokens``.

A token reads ``qrt_<id>_<secret>``; the store keeps its id, name, scopes and
the SHA-256 of its secret (a 256-bit random secret needs no slow hash). Records
are items that are never leased; like every item they expire, after 366 days,
which is also the longest life of a token.

The API fails closed (:class:`TokenCheck`): a server that requires tokens
never serves a request without a valid one, even when the last token is
revoked or expires (then it refuses everything). It requires them when it is
bound to a public address, when the store has (or ever had) tokens — the
queue ``querator.tokens`` exists — or once a token appears while it runs;
only ``querator serve --no-auth``, on a loopback address, serves without.

A token is valid for every namespace the server serves, or only for those it
names (``querator tokens create NAME --for-namespaces acme,globex``): a call
for another namespace is refused (Forbidden) before the server opens it.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Collection
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from querator.errors import Forbidden, InvalidArgument, Unauthorized
from querator.queue.backends.namespaces import DEFAULT_NAMESPACE, check_namespace
from querator.queue.models import Item, QueueSettings, StoredItem
from querator.queue.service import AsyncQueueClient
from querator.queue.validation import MAX_DURATION

log = logging.getLogger("querator.http")

TOKENS_QUEUE = "querator.tokens"
TOKENS_SETTINGS = QueueSettings(lease_timeout=60.0, expire_timeout=MAX_DURATION)
TOKEN_KIND = "querator.token"
SCOPES = ("metrics", "read", "write", "admin")
"""Each scope includes the ones before it (``metrics``: ``GET /metrics`` only)."""
AuthMode = Literal["off", "auto", "on"]
"""How a server checks tokens: ``off`` (``--no-auth``, loopback only: open),
``on`` (required from the start) or ``auto`` (required as soon as the store has
the tokens queue, at start-up or later; open until then)."""
MAX_TOKEN_NAMESPACES = 64
"""The most namespaces one token may name."""
REFRESH = 2.0
"""Seconds the server trusts its copy of the token list (a revoke applies within this)."""


class TokenRecord(BaseModel):
    """A stored token: everything but its secret."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str
    """Public id (the middle of the token)."""
    name: str
    """What the token is for."""
    scope: str
    """``read``, ``write`` or ``admin``."""
    secret_sha256: str
    """Hex SHA-256 of the secret."""
    created_at: datetime
    namespaces: tuple[str, ...] | None = None
    """The namespaces the token is valid for; None (tokens made before this
    field, or without ``--for-namespaces``): every one the server serves."""

    def allows(self, namespace: str) -> bool:
        """True when the token is valid for calls to ``namespace``."""
        return self.namespaces is None or namespace in self.namespaces


def token_namespaces(names: Collection[str] | None) -> tuple[str, ...] | None:
    """The namespaces a new token is for, checked (InvalidArgument for a bad
    or repeated name, none, or more than :data:`MAX_TOKEN_NAMESPACES`); None:
    every namespace the server serves."""
    if names is None:
        return None
    checked = tuple(check_namespace(name) for name in names)
    if not checked:
        raise InvalidArgument("namespaces", "must name at least one namespace (or be omitted)")
    if len(checked) > MAX_TOKEN_NAMESPACES:
        raise InvalidArgument(
            "namespaces", f"at most {MAX_TOKEN_NAMESPACES} namespaces, got {len(checked)}"
        )
    if len(set(checked)) != len(checked):
        raise InvalidArgument("namespaces", f"names a namespace twice: {', '.join(checked)}")
    return checked


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _parse(token: str) -> tuple[str, str] | None:
    parts = token.split("_")
    if len(parts) != 3 or parts[0] != "qrt" or not parts[1] or not parts[2]:
        return None
    return parts[1], parts[2]


async def create_token(
    aq: AsyncQueueClient, name: str, scope: str, namespaces: Collection[str] | None = None
) -> tuple[str, TokenRecord]:
    """Store a new token; returns the token text (shown once) and its record.
    ``namespaces``: those it is valid for (None: every one the server serves)."""
    allowed = token_namespaces(namespaces)
    if scope not in SCOPES:
        raise InvalidArgument("scope", f"must be one of {', '.join(SCOPES)}, got {scope!r}")
    if not name.strip() or len(name) > 200:
        raise InvalidArgument("name", "must be 1-200 characters, not only spaces")
    await aq.create_queue(TOKENS_QUEUE, TOKENS_SETTINGS, exist_ok=True)
    token_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32).replace("_", "-")
    record = TokenRecord(
        id=token_id,
        name=name,
        scope=scope,
        secret_sha256=_digest(secret),
        created_at=datetime.now(UTC),
        namespaces=allowed,
    )
    item = Item(payload=record.model_dump_json().encode(), kind=TOKEN_KIND, dedup_key=token_id)
    await aq.produce(TOKENS_QUEUE, [item])
    return f"qrt_{token_id}_{secret}", record


async def tokens_queue_exists(aq: AsyncQueueClient) -> bool:
    """True when the store has the tokens queue: it has, or had, a token."""
    return TOKENS_QUEUE in [info.name for info in await aq.list_queues(TOKENS_QUEUE, 1)]


async def _items(aq: AsyncQueueClient) -> list[StoredItem]:
    if not await tokens_queue_exists(aq):
        return []
    found: list[StoredItem] = []
    pivot: str | None = None
    while True:
        page = await aq.list_items(TOKENS_QUEUE, pivot=pivot, limit=500)
        found += page if pivot is None else page[1:]
        if len(page) < 500:
            return found
        pivot = page[-1].id


async def list_tokens(aq: AsyncQueueClient) -> list[TokenRecord]:
    """Every stored token (without secrets)."""
    records = []
    for item in await _items(aq):
        try:
            records.append(TokenRecord.model_validate_json(item.payload))
        except ValidationError:
            continue
    return records


async def revoke_token(aq: AsyncQueueClient, token_id: str) -> bool:
    """Delete a token by id; False when there was none."""
    found = [item for item in await _items(aq) if item.dedup_key == token_id]
    if found:
        await aq.delete_items(TOKENS_QUEUE, [item.id for item in found])
    return bool(found)


class TokenCheck:
    """Checks an ``Authorization`` header against the stored tokens.

    Once tokens are required (``mode`` ``on``, or ``auto`` and the tokens
    queue seen) they stay required for the life of the check: an empty token
    set then refuses every call.
    """

    def __init__(
        self, aq: AsyncQueueClient, mode: AuthMode = "auto", own: str = DEFAULT_NAMESPACE
    ) -> None:
        self._aq = aq
        self._mode = mode
        self._own = own
        self._tokens: dict[str, TokenRecord] = {}
        self._read_at = float("-inf")

    @property
    def required(self) -> bool:
        """True once every call needs a valid token."""
        return self._mode == "on"

    async def start(self) -> None:
        """Read the tokens once (at start-up): in ``auto`` mode a store that
        has the tokens queue requires tokens from the first call. Logs a
        warning when the server is open or refuses everything."""
        tokens = await self._current()
        if self._mode == "off":
            log.warning(
                "querator: authentication is off (--no-auth): whoever reaches this "
                "address may call every endpoint"
            )
        elif self._mode == "on" and not tokens:
            log.warning(
                "querator: no token exists: every call is refused until one is "
                "created (querator tokens create NAME)"
            )

    async def _current(self) -> dict[str, TokenRecord]:
        if time.monotonic() - self._read_at > REFRESH:
            if self._mode == "auto" and await tokens_queue_exists(self._aq):
                self._mode = "on"  # latched: never open again in this process
            self._tokens = {record.id: record for record in await list_tokens(self._aq)}
            self._read_at = time.monotonic()
        return self._tokens

    async def check(self, header: str | None, scope: str, namespace: str | None = None) -> None:
        """Raise Unauthorized or Forbidden unless the header allows ``scope`` in
        ``namespace`` (None: the server's own)."""
        if self._mode == "off":
            return
        tokens = await self._current()
        if self._mode == "auto":
            return
        if not tokens:
            raise Unauthorized(
                "authentication required; no token exists: every call is refused "
                "until one is created (querator tokens create)"
            )
        if not header:
            raise Unauthorized("authentication required")
        if not header.startswith("Bearer "):
            raise Unauthorized("invalid authorization header format")
        parsed = _parse(header.removeprefix("Bearer ").strip())
        record = tokens.get(parsed[0]) if parsed else None
        if parsed is None or record is None:
            raise Unauthorized("api key is invalid")
        if not hmac.compare_digest(record.secret_sha256, _digest(parsed[1])):
            raise Unauthorized("api key is invalid")
        if SCOPES.index(record.scope) < SCOPES.index(scope):
            raise Forbidden(f"access denied; the token's scope is {record.scope}, {scope} needed")
        wanted = self._own if namespace is None else namespace
        if not record.allows(wanted):
            names = ", ".join(record.namespaces or ())
            raise Forbidden(f"access denied; the token is for namespaces {names}, not {wanted!r}")
