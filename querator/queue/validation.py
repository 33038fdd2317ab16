"""Rules for user input, checked before anything reaches a backend.

Every check raises :class:`querator.errors.InvalidArgument` naming the field and
the rule. User-given names never become SQL text; these rules are an extra
guard, not the reason it is safe.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from datetime import datetime

from querator.errors import InvalidArgument
from querator.queue.dead_reasons import clean_reason

NAME_PATTERN = r"^[A-Za-z0-9._-]{1,512}$"
"""Queue names and client ids: letters, digits, ``.``, ``_``, ``-``; 1 to 512 characters."""
MAX_DURATION = 366.0 * 86_400.0
"""The longest duration accepted anywhere: one (leap) year, in seconds."""
MAX_BATCH = 1_000
"""The most items one call may carry."""
MAX_PAYLOAD = 64 * 1024 * 1024
"""The largest payload accepted, in bytes."""
MIN_PRIORITY = -32_768
"""The lowest priority an item, run, step or task may have."""
MAX_PRIORITY = 32_767
"""The highest priority (a 16-bit signed integer: PostgreSQL's ``smallint``)."""

_NAME = re.compile(NAME_PATTERN)
_GOOD_NAMES: set[str] = set()
"""Names already found valid (a set lookup instead of a regex on hot paths)."""
_GOOD_NAMES_MAX = 4_096


QUOTE_LIMIT = 60
"""Characters of a bad value an error message repeats."""


def quoted(value: object) -> str:
    """``repr(value)``, cut to :data:`QUOTE_LIMIT` characters (with its length) when long."""
    text = repr(value)
    if len(text) <= QUOTE_LIMIT:
        return text
    size = f" ({len(value):,} characters)" if isinstance(value, str) else ""
    return f"{text[: QUOTE_LIMIT - 3]}...{size}"


def check_name(field: str, value: object) -> str:
    """Return ``value`` if it is a valid name, else raise InvalidArgument."""
    if type(value) is str and value in _GOOD_NAMES:
        return value
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise InvalidArgument(
            field, f"{quoted(value)} must be 1-512 characters of letters, digits, '.', '_' or '-'"
        )
    if type(value) is str:
        if len(_GOOD_NAMES) >= _GOOD_NAMES_MAX:
            _GOOD_NAMES.clear()
        _GOOD_NAMES.add(value)
    return value


def check_priority(field: str, value: object) -> int:
    """Return ``value`` if it is a priority: an ``int`` (not a bool) from
    :data:`MIN_PRIORITY` to :data:`MAX_PRIORITY`; higher is leased first."""
    if type(value) is int and MIN_PRIORITY <= value <= MAX_PRIORITY:
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(field, f"must be an int, got {type(value).__name__}")
    raise InvalidArgument(
        field, f"must be from {MIN_PRIORITY} to {MAX_PRIORITY}, got {quoted(value)}"
    )


MAX_KINDS = 1_000
"""The most kinds one lease may filter on."""
_GOOD_KINDS: dict[tuple[str, ...], tuple[str, ...]] = {}
"""Kind filters already checked (a lease's filter is checked once, not at every call)."""


def check_kinds(kinds: Iterable[str] | None) -> tuple[str, ...] | None:
    """A lease's kind filter as a sorted tuple of distinct kinds (None: no filter):
    1 to :data:`MAX_KINDS` strings of at most 512 characters, without NUL."""
    if kinds is None:
        return None
    if type(kinds) is tuple and kinds in _GOOD_KINDS:
        return _GOOD_KINDS[kinds]
    if isinstance(kinds, str | bytes):
        raise InvalidArgument("kinds", "must be a list of kinds, not one string")
    given = tuple(kinds)
    if not 1 <= len(given) <= MAX_KINDS:
        raise InvalidArgument("kinds", f"must hold 1 to {MAX_KINDS} kinds, got {len(given)}")
    for index, kind in enumerate(given):
        if not isinstance(kind, str) or len(kind) > 512 or "\x00" in kind:
            raise InvalidArgument(
                f"kinds[{index}]", f"{quoted(kind)} must be a string of at most 512 characters"
            )
    checked = tuple(sorted(set(given)))
    if len(_GOOD_KINDS) >= _GOOD_NAMES_MAX:
        _GOOD_KINDS.clear()
    _GOOD_KINDS[given] = checked
    return checked


def check_batch(field: str, size: int) -> None:
    """Reject empty or oversize batches."""
    if size < 1 or size > MAX_BATCH:
        raise InvalidArgument(field, f"must hold 1 to {MAX_BATCH} entries, got {size}")


def check_sequence(field: str, values: object, what: str) -> Sequence[object]:
    """``values`` if it is a list (any sequence) and not one str or bytes, which
    would otherwise be taken apart character by character."""
    if isinstance(values, str | bytes | bytearray | memoryview) or not isinstance(values, Sequence):
        one = "string" if isinstance(values, str) else type(values).__name__
        raise InvalidArgument(field, f"must be a list of {what}, not one {one}")
    return values


def check_keys(dedup_keys: Sequence[str], field: str = "dedup_keys") -> list[str]:
    """1 to MAX_BATCH dedup keys of 1-512 characters each; repeats dropped."""
    check_sequence(field, dedup_keys, "keys")
    check_batch(field, len(dedup_keys))
    for index, key in enumerate(dedup_keys):
        if not isinstance(key, str) or not 1 <= len(key) <= 512:
            raise InvalidArgument(f"{field}[{index}]", "must be a string of 1-512 chars")
        if "\x00" in key:
            raise InvalidArgument(f"{field}[{index}]", "must not contain the NUL character")
    return list(dict.fromkeys(dedup_keys))


def _check_key_text(field: str, value: object, low: int) -> str:
    if not isinstance(value, str) or not low <= len(value) <= 512:
        raise InvalidArgument(field, f"must be a string of {low}-512 chars")
    if "\x00" in value:
        raise InvalidArgument(field, "must not contain the NUL character")
    return value


def key_range(prefix: object, after: object) -> tuple[str, bool, str | None]:
    """``(low, include_low, high)`` of the keys starting with ``prefix`` past ``after``.

    ``high`` is the first string past every key with the prefix (None: no bound).
    """
    prefix = _check_key_text("prefix", prefix, 0)
    high: str | None = None
    stem = prefix.rstrip(chr(0x10FFFF))
    if stem:
        last = ord(stem[-1]) + 1
        high = stem[:-1] + chr(0xE000 if 0xD800 <= last <= 0xDFFF else last)
    if after is None:
        return prefix, True, high
    after = _check_key_text("after", after, 1)
    if after < prefix:
        return prefix, True, high
    return after, False, high


def check_count(field: str, value: object, low: int, high: int) -> int:
    """Return ``value`` if it is an int in ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgument(
            field, f"must be an integer from {low} to {high}, got {quoted(value)}"
        )
    return value


def check_flag(field: str, value: object) -> bool:
    """Return ``value`` if it is a bool."""
    if not isinstance(value, bool):
        raise InvalidArgument(field, f"must be True or False, got {quoted(value)}")
    return value


def check_duration(field: str, value: object, *, allow_zero: bool = False) -> float:
    """Return ``value`` as seconds if it is a finite duration within range."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidArgument(field, f"must be a number of seconds, got {quoted(value)}")
    low_ok = value >= 0 if allow_zero else value > 0
    if not low_ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise InvalidArgument(field, f"must be {bound} seconds, got {value:g}")
    if value > MAX_DURATION:
        raise InvalidArgument(field, f"must be at most {MAX_DURATION:.0f} seconds, got {value:g}")
    return float(value)


def check_instant(field: str, value: object) -> datetime | None:
    """Return ``value`` if it is None or a timezone-aware datetime."""
    if value is None:
        return None
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidArgument(field, "must be a timezone-aware datetime")
    return value


def check_reason(reason: object) -> str | None:
    """A dead-letter reason: None, or a str kept as a header holds it (NUL
    characters dropped, cut to :data:`~querator.queue.dead_reasons.MAX_REASON`)."""
    if reason is None:
        return None
    if not isinstance(reason, str):
        raise InvalidArgument("reason", f"must be a str or None, got {type(reason).__name__}")
    return clean_reason(reason)
