"""Where deliveries may go: URL rules and the SSRF guard.

The address check is pure (:func:`refusal`); :func:`resolve` looks a host up
and checks every address it resolves to, so a name pointing at an internal
address is refused just like the literal address. The worker then connects
to the address it checked (not to the name again), which closes the DNS
rebinding window between check and connect.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import anyio

from querator.errors import InvalidArgument
from querator.webhooks.errors import TargetRefused

__all__ = ["Target", "check_url", "embedded", "lookup", "pick", "refusal"]

MAX_URL = 2_048
METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OCI, DigitalOcean, OpenStack …
        "169.254.170.2",  # AWS ECS task metadata
        "169.254.170.23",  # AWS EKS pod identity
        "169.254.0.23",  # Tencent Cloud
        "100.100.100.200",  # Alibaba Cloud
        "168.63.129.16",  # Azure wire server
        "192.0.0.192",  # Oracle Cloud (legacy)
        "fd00:ec2::254",  # AWS, IPv6
        "fd00:ec2::23",  # AWS EKS pod identity, IPv6
    )
)
"""Cloud metadata services: refused always, even with ``allow_private``."""
METADATA_RANGE = ipaddress.ip_network("169.254.0.0/16")
"""IPv4 link-local, where metadata services live: refused even with ``allow_private``."""
NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
"""NAT64 prefixes (well-known, local-use): the last 32 bits are an IPv4 address."""
TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
"""IPv4-translated addresses (SIIT)."""
COMPATIBLE = ipaddress.ip_network("::/96")
"""IPv4-compatible addresses (deprecated), besides ``::`` and ``::1``."""

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class Target:
    """A checked endpoint URL, split into what a request needs."""

    url: str
    scheme: str
    host: str
    """Host name or literal address, without brackets."""
    port: int
    path: str
    """Path plus query, at least ``/``."""


def check_url(url: object) -> Target:
    """The parts of an ``http(s)://`` URL; InvalidArgument naming what is wrong."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL:
        raise InvalidArgument("url", f"must be a string of 1 to {MAX_URL} characters")
    if any(ch.isspace() or ord(ch) < 32 for ch in url):
        raise InvalidArgument("url", "must not contain spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidArgument("url", f"{url!r} is malformed: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise InvalidArgument("url", f"{url!r} must start with http:// or https://")
    host = parts.hostname
    if not host:
        raise InvalidArgument("url", f"{url!r} has no host")
    if parts.username is not None or parts.password is not None:
        raise InvalidArgument("url", "must not carry a user name or password")
    if parts.fragment:
        raise InvalidArgument("url", "must not have a #fragment")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(url, scheme, host, port or (443 if scheme == "https" else 80), path)


def _low32(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)


_CARRIERS: tuple[
    tuple[str, Callable[[ipaddress.IPv6Address], ipaddress.IPv4Address | None]], ...
] = (
    ("IPv4-mapped", lambda a: a.ipv4_mapped),
    ("6to4", lambda a: a.sixtofour),
    ("IPv4-translated", lambda a: _low32(a) if a in TRANSLATED else None),
    ("NAT64", lambda a: _low32(a) if any(a in prefix for prefix in NAT64) else None),
    ("IPv4-compatible", lambda a: _low32(a) if a in COMPATIBLE and int(a) > 1 else None),
)
"""The IPv6 forms that carry an IPv4 address, and how to read it."""


def embedded(address: Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """The IPv4 address an IPv6 address carries, with the form's name (IPv4-mapped,
    6to4, NAT64, …); None for an IPv4 address or an IPv6 one that carries none."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    for form, read in _CARRIERS:
        inner = read(address)
        if inner is not None:
            return form, inner
    return None


def refusal(address: Address, allow_private: bool = False) -> str | None:
    """Why deliveries may not go to ``address`` (None: they may).

    An IPv6 form that carries an IPv4 address (IPv4-mapped or -compatible,
    6to4, NAT64, SIIT) is judged by that address. Cloud metadata addresses are
    refused even when ``allow_private`` admits loopback and private ones.
    """
    carried = embedded(address)
    if carried is not None:
        form, inner = carried
        why = refusal(inner, allow_private)
        if why is not None:
            return f"{form} form of {inner}, {why}"
        deprecated = form == "IPv4-compatible" and not allow_private
        return "IPv4-compatible (deprecated)" if deprecated else None
    if address in METADATA:
        return "cloud metadata"
    if address in METADATA_RANGE:
        return "link-local, where cloud metadata services live"
    return None if allow_private else _private(address)


def _private(address: Address) -> str | None:
    """Why ``address`` is not a public address (None: it is)."""
    if isinstance(address, ipaddress.IPv6Address) and address.teredo is not None:
        return "Teredo tunnel"
    for why, hit in (
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("private", address.is_private),
        ("multicast", address.is_multicast),
        ("unspecified", address.is_unspecified),
        ("reserved", address.is_reserved),
    ):
        if hit:
            return why
    return None if address.is_global else "not globally routable"


def literal(host: str) -> Address | None:
    """``host`` as an IP address, if it is one."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


async def lookup(target: Target) -> list[Address]:
    """Every address ``target``'s host resolves to (the literal itself for an
    address); InvalidArgument when the name does not resolve."""
    found = literal(target.host)
    if found is not None:
        return [found]
    try:
        infos = await anyio.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise InvalidArgument("url", f"host {target.host!r} does not resolve: {exc}") from None
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    if not addresses:
        raise InvalidArgument("url", f"host {target.host!r} does not resolve")
    return addresses


def pick(target: Target, addresses: list[Address], allow_private: bool) -> Address:
    """The address to connect to: the first one, once every one has passed the
    check (:class:`TargetRefused` otherwise; ``allow_private`` admits loopback
    and private addresses, never cloud metadata)."""
    for address in addresses:
        why = refusal(address, allow_private)
        if why is not None:
            never = allow_private or refusal(address, allow_private=True) is not None
            raise TargetRefused(target.url, str(address), why, allowable=not never)
    return addresses[0]
