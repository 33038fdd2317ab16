"""Go duration strings (``"30s"``, ``"1m30s"``, ``"250ms"``), as Querator's
wire protocol spells durations: parsed to and written from seconds.

Pure functions with no I/O, shared by the server's wire models and the client.
"""

from __future__ import annotations

import re

UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,
    "\u03bcs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
"""Seconds per unit, as Go's ``time.ParseDuration`` accepts them."""

_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
MAX_TEXT = 64
"""The longest duration string read (Querator caps its timeouts' length too)."""
PATTERN = r"^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$"
"""The accepted spelling, for the OpenAPI document."""


def parse_duration(text: str) -> float:
    """Seconds named by a Go duration string; ValueError naming the problem."""
    if not isinstance(text, str):
        raise ValueError(f"must be a duration string such as '30s', got {text!r}")
    if len(text) > MAX_TEXT:
        raise ValueError(f"cannot be longer than {MAX_TEXT} characters")
    body = text
    sign = 1.0
    if body[:1] in "+-" and body:
        sign = -1.0 if body[0] == "-" else 1.0
        body = body[1:]
    if body == "0":
        return 0.0
    if not body:
        raise ValueError(f"time: invalid duration {text!r}")
    total = 0.0
    position = 0
    while position < len(body):
        found = _PART.match(body, position)
        if found is None or found.group(1) in ("", "."):
            raise ValueError(f"time: invalid duration {text!r}")
        total += float(found.group(1)) * UNITS[found.group(2)]
        position = found.end()
    return sign * total


def format_duration(seconds: float) -> str:
    """The Go spelling of ``seconds``: ``"1h0m0s"``, ``"1m30s"``, ``"250ms"``, ``"0s"``."""
    if seconds == 0:
        return "0s"
    sign = "-" if seconds < 0 else ""
    nanos = round(abs(seconds) * 1e9)
    if nanos < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("\u00b5s", 1_000), ("ns", 1)):
            if nanos >= size:
                return f"{sign}{_decimal(nanos, size)}{unit}"
    hours, rest = divmod(nanos, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    text = f"{_decimal(rest, 1_000_000_000)}s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return sign + text


def _decimal(value: int, size: int) -> str:
    whole, fraction = divmod(value, size)
    if not fraction:
        return str(whole)
    digits = str(fraction).rjust(len(str(size)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"
