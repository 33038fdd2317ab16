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
from dataclasses import dataclass
from urllib.parse import urlsplit

import anyio

from querator.errors import InvalidArgument
from querator.webhooks.errors import TargetRefused

__all__ = ["Target", "check_url", "lookup", "pick", "refusal"]

MAX_URL = 2_048
METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254")
)
"""Cloud metadata services (AWS, ECS, Alibaba, AWS IPv6): refused by name."""

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


def refusal(address: Address) -> str | None:
    """Why deliveries may not go to ``address`` (None: it is a public address)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address in METADATA:
        return "cloud metadata"
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
    check (:class:`TargetRefused` otherwise, unless ``allow_private``)."""
    if not allow_private:
        for address in addresses:
            why = refusal(address)
            if why is not None:
                raise TargetRefused(target.url, str(address), why)
    return addresses[0]
