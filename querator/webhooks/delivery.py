"""One HTTP attempt: sign, connect to the checked address, POST, read the answer.

Each endpoint gets its own ``httpx.AsyncClient`` (pooled keep-alive
connections, at most ``max_in_flight`` of them). The host is resolved and
every address checked (:mod:`querator.webhooks.targets`); the request then
goes to the checked address itself, with the ``Host`` header and the TLS
server name (SNI, also used to verify the certificate) set to the URL's host,
so a DNS answer that changes between the check and the connect cannot send
the request elsewhere. Proxies from the environment are ignored and
redirects are not followed (a 3xx is a failed attempt).
"""

from __future__ import annotations

import ssl
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio
import certifi
import httpx

from querator.errors import InvalidArgument
from querator.webhooks.endpoints import Endpoint
from querator.webhooks.errors import TargetRefused
from querator.webhooks.layout import Delivery
from querator.webhooks.settings import WebhookSettings
from querator.webhooks.signing import signature_header
from querator.webhooks.targets import Address, Target, check_url, lookup, pick

__all__ = ["Result", "Sender"]

DNS_TTL = 30.0
"""Seconds a resolved host's addresses are reused."""
DRAIN_LIMIT = 64 * 1024
"""Bytes of an answer read (so its connection can be reused); the excerpt is a prefix."""
USER_AGENT = "querator-webhooks"


@dataclass(frozen=True, slots=True)
class Result:
    """What one attempt got."""

    status_code: int | None
    """The HTTP status; None when no answer came (connect error, timeout, refused target)."""
    latency: float
    """Seconds from the start of the attempt to the end of the answer (or the error)."""
    response: str = ""
    error: str = ""
    retry_after: str | None = None
    """The ``Retry-After`` header, as received."""
    refused: bool = False
    """The host resolved to an address deliveries may not reach (SSRF guard)."""

    @property
    def delivered(self) -> bool:
        """A 2xx answer."""
        return self.status_code is not None and 200 <= self.status_code < 300


@dataclass(slots=True)
class _Client:
    url: str
    size: int
    target: Target
    client: httpx.AsyncClient


class Sender:
    """Sends attempts; one instance per delivery worker (close it at the end)."""

    def __init__(self, settings: WebhookSettings) -> None:
        self.settings = settings
        self._clients: dict[str, _Client] = {}
        self._dns: dict[str, tuple[float, list[Address]]] = {}
        self._retired: list[httpx.AsyncClient] = []
        self._tls: ssl.SSLContext | None = None
        """One TLS context for every client (loading the CA bundle costs ~15 ms)."""
        """Clients of endpoints whose URL or size changed: closed at the end
        (in-flight attempts may still use them)."""

    def _client(self, endpoint: Endpoint) -> _Client:
        held = self._clients.get(endpoint.id)
        if held is not None and (held.url, held.size) == (endpoint.url, endpoint.max_in_flight):
            return held
        if held is not None:
            self._retire(held)
        timeout = httpx.Timeout(self.settings.timeout, connect=self.settings.connect_timeout)
        limits = httpx.Limits(
            max_connections=endpoint.max_in_flight,
            max_keepalive_connections=endpoint.max_in_flight,
        )
        if self._tls is None:
            self._tls = ssl.create_default_context(cafile=self.settings.ca_file or certifi.where())
        client = httpx.AsyncClient(
            timeout=timeout,
            limits=limits,
            follow_redirects=False,
            trust_env=False,
            verify=self._tls,
        )
        target = check_url(endpoint.url)
        held = self._clients[endpoint.id] = _Client(
            endpoint.url, endpoint.max_in_flight, target, client
        )
        return held

    def _retire(self, held: _Client) -> None:
        self._retired.append(held.client)

    async def _address(self, target: Target) -> Address:
        now = time.monotonic()
        cached = self._dns.get(target.host)
        if cached is None or cached[0] < now:
            cached = (now + DNS_TTL, await lookup(target))
            self._dns[target.host] = cached
        return pick(target, cached[1], self.settings.allow_private)

    async def attempt(self, endpoint: Endpoint, delivery: Delivery) -> Result:
        """POST ``delivery`` to ``endpoint``, signed with its current secrets."""
        began = time.monotonic()
        try:
            held = self._client(endpoint)
            target = held.target
            address = await self._address(target)
            with anyio.fail_after(self.settings.timeout):
                return await self._post(held.client, target, address, endpoint, delivery, began)
        except TargetRefused as exc:
            return Result(None, time.monotonic() - began, error=str(exc), refused=True)
        except InvalidArgument as exc:  # unresolvable host
            return Result(None, time.monotonic() - began, error=str(exc))
        except TimeoutError:
            return Result(
                None, time.monotonic() - began, error=f"timed out after {self.settings.timeout}s"
            )
        except Exception as exc:  # any failure to deliver is a failed attempt, retried
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            return Result(None, time.monotonic() - began, error=error)

    async def _post(
        self,
        client: httpx.AsyncClient,
        target: Target,
        address: Address,
        endpoint: Endpoint,
        delivery: Delivery,
        began: float,
    ) -> Result:
        body = delivery.body.encode()
        stamp = int(time.time())
        default_port = target.port == (443 if target.scheme == "https" else 80)
        host_header = target.host if ":" not in target.host else f"[{target.host}]"
        if not default_port:
            host_header += f":{target.port}"
        shown = str(address) if address.version == 4 else f"[{address}]"
        headers = {
            **endpoint.headers,
            "host": host_header,
            "content-type": "application/json",
            "user-agent": USER_AGENT,
            "webhook-id": delivery.message_id,
            "webhook-timestamp": str(stamp),
            "webhook-signature": signature_header(
                endpoint.signing_secrets(datetime.now(UTC)), delivery.message_id, stamp, body
            ),
        }
        extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
        url = f"{target.scheme}://{shown}:{target.port}{target.path}"
        async with client.stream(
            "POST", url, content=body, headers=headers, extensions=extensions
        ) as answer:
            kept = bytearray()
            async for chunk in answer.aiter_raw():
                kept += chunk[: DRAIN_LIMIT - len(kept)]
                if len(kept) >= DRAIN_LIMIT:
                    break
        excerpt = bytes(kept[: self.settings.response_excerpt]).decode(errors="replace")
        return Result(
            answer.status_code,
            time.monotonic() - began,
            response=excerpt,
            retry_after=answer.headers.get("retry-after"),
        )

    async def close(self) -> None:
        """Close every client (and its connections)."""
        clients = [held.client for held in self._clients.values()] + self._retired
        self._clients.clear()
        self._retired = []
        for client in clients:
            await client.aclose()
