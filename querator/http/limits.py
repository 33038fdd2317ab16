"""The connection limits of ``querator serve`` (enforced by
:mod:`querator.http.connections`), declared once for the CLI and the server."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConnectionLimits:
    """The limits of one server (``querator serve`` options)."""

    header_timeout: float = 10.0
    """Seconds a client has to send a request's headers (``--header-timeout``)."""
    body_timeout: float = 60.0
    """Seconds a client has to send a request's body once the headers are in
    (``--body-timeout``)."""
    max_per_client: int = 256
    """Open connections one client address may hold; 0: no cap
    (``--max-client-connections``)."""
