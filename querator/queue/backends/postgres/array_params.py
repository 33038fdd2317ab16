"""How arrays are bound: literals for texts, numbers and instants, binary for payloads.

A literal is bound like any value and cast by the statement
(``%(x)s::text[]``); building it costs a fraction of psycopg's list dumper
(which looks a dumper up per element), on the statements every item goes
through. Payloads are bound as a binary ``bytea[]`` (:class:`Payloads`): a
literal would be twice their size.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from psycopg.adapt import AdaptersMap
from psycopg.types.array import ListBinaryDumper


class Payloads(list[bytes]):
    """Payloads bound as a binary ``bytea[]``, also where the statement does not
    say so (``$n`` placeholders): :func:`register` makes it so on a connection."""


def register(adapters: AdaptersMap) -> None:
    """Bind :class:`Payloads` in binary on the connection owning ``adapters``."""
    adapters.register_dumper(Payloads, ListBinaryDumper)


def int_array(values: Iterable[int]) -> str:
    """An array literal of integers. ``int.__repr__`` spells exactly the number,
    also for subclasses (``bool`` included: callers pass ints only)."""
    return "{" + ",".join(map(int.__repr__, values)) + "}"


def _quoted(text: str | None) -> str:
    if text is None:
        return "NULL"
    if "\\" in text or '"' in text:
        text = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text + '"'


def text_array(values: Iterable[str | None]) -> str:
    """An array literal of texts (None: NULL). Every element is double-quoted with
    backslash and double quote escaped, so commas, braces, blanks and the word
    NULL stay text. (No NUL character: PostgreSQL text cannot hold one, and items
    are validated before they get here.) A column of one value (every item's
    ``kind`` is ``""``, say) is quoted once."""
    texts = values if isinstance(values, list) else list(values)
    if texts and texts.count(texts[0]) == len(texts):
        return "{" + ",".join([_quoted(texts[0])] * len(texts)) + "}"
    return "{" + ",".join(map(_quoted, texts)) + "}"


def instant_array(values: Iterable[datetime | None]) -> str:
    """An array literal of aware instants for ``timestamptz[]`` (None: NULL), in
    ISO 8601 with their offset, which PostgreSQL reads exactly (microseconds)."""
    return text_array([None if value is None else value.isoformat() for value in values])
