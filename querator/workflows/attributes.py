"""Search attributes of runs: checked values, their stored snapshots and index keys.

A run's attributes (``start(..., attributes={"customer": "acme"})``, changed by
``set_attributes(...)`` in its body) are a few named ``str``/``int``/``bool``
values that :func:`~querator.workflows.list_runs` filters on
(``attributes={"customer": "acme"}``: an AND of equalities).

They are indexed as the run index is (:mod:`querator.workflows.run_index`):
keyed entries of the results queue, one per attribute held, whose keys sort
newest first under the attribute's value, so a filtered page is one range scan
of the dedup-key index whatever the number of runs stored:

- ``index/at/{key}/{value}/{t}/{run}/{gen}`` (every workflow) and
  ``index/wa/{workflow}/{key}/{value}/{t}/{run}/{gen}`` (one workflow);
  ``{value}`` is typed (``s:acme``, ``i:1999``, ``b:true``; a string that is
  not plain is ``s#`` and a digest), ``{gen}`` the generation of the run's
  attributes that set the value (0: the start).

The start writes the entries with the run's meta (``RunMeta.attributes``).
Each ``set_attributes`` call is a record of the body's history (replayed, never
done twice) stored with the body's next commit together with a snapshot of the
run's attributes after it, ``{run}/attrs/{999999 - gen}`` (the newest sorts
first), and the entries of the values it changed. The entries of values a run
no longer holds are skipped by the lister (the newest snapshot says which
value, and which generation, is current) and deleted by it; a purge deletes a
run's entries with its snapshots, last, with its meta.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from datetime import datetime

from pydantic import Field

from querator.errors import InvalidArgument
from querator.model_bases import StoredModel
from querator.workflows.run_index import PREFIX, facet_segment, stamp

__all__ = [
    "MAX_ATTRIBUTES",
    "MAX_KEY",
    "MAX_TEXT",
    "AttributeValue",
    "AttributesRecord",
    "attribute_entry_keys",
    "attribute_prefix",
    "attributes_prefix",
    "check_attributes",
    "condition_text",
    "merged",
    "parse_attribute_entry",
    "parse_condition",
    "run_position",
    "same_value",
    "snapshot_key",
    "start_entry_key",
]

AttributeValue = str | int | bool
"""What an attribute holds."""
MAX_ATTRIBUTES = 16
"""Attributes a run holds at most (a filter names at most this many too)."""
MAX_KEY = 64
"""Characters of an attribute's name at most."""
MAX_TEXT = 256
"""Characters of a string value at most."""
_KEY = re.compile(rf"[A-Za-z_][A-Za-z0-9_.-]{{0,{MAX_KEY - 1}}}")
_PLAIN_TEXT = re.compile(r"[A-Za-z0-9._@:+-]{0,120}")
_INT64 = 2**63
_TOP_GEN = 999_999
"""Snapshots are keyed ``_TOP_GEN - gen``: a prefix scan finds the newest first."""


class AttributesRecord(StoredModel):
    """``{run}/attrs/{999999 - gen}``: a run's attributes after its ``gen``-th
    ``set_attributes`` call."""

    gen: int
    values: dict[str, AttributeValue] = Field(default_factory=dict)
    since: dict[str, int] = Field(default_factory=dict)
    """The generation that set each value (0: the start)."""


def check_attributes(attributes: object, field: str = "attributes") -> dict[str, AttributeValue]:
    """``attributes`` as a plain dict, or :class:`InvalidArgument` naming the rule
    it broke: a mapping of at most :data:`MAX_ATTRIBUTES` names (a letter or
    ``_`` then letters, digits, ``_.-``; at most :data:`MAX_KEY` characters) to
    ``str`` (at most :data:`MAX_TEXT` characters), ``int`` (64-bit) or ``bool``."""
    if not isinstance(attributes, Mapping):
        raise InvalidArgument(field, f"must be a mapping, got {type(attributes).__name__}")
    if len(attributes) > MAX_ATTRIBUTES:
        raise InvalidArgument(field, f"holds at most {MAX_ATTRIBUTES} keys, got {len(attributes)}")
    checked: dict[str, AttributeValue] = {}
    for key, value in attributes.items():
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise InvalidArgument(
                field,
                f"key {key!r} must be a letter or _ then letters, digits, _ . - "
                f"(at most {MAX_KEY} characters)",
            )
        checked[key] = _check_value(f"{field}[{key!r}]", value)
    return checked


def _check_value(field: str, value: object) -> AttributeValue:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not -_INT64 <= value < _INT64:
            raise InvalidArgument(field, "must be a 64-bit integer")
        return int(value)
    if isinstance(value, str):
        if len(value) > MAX_TEXT:
            raise InvalidArgument(field, f"must be at most {MAX_TEXT} characters")
        return value
    raise InvalidArgument(field, f"must be a str, int or bool, got {type(value).__name__}")


def parse_condition(text: str, field: str = "where") -> tuple[str, AttributeValue]:
    """``name=value`` (``querator runs list --where``, the dashboard's filter) as a
    checked pair: a value that is a JSON integer, ``true`` or ``false`` is that,
    a JSON string (``'"1999"'``) is the string, anything else the text as it is."""
    name, sep, raw = text.partition("=")
    if not sep:
        raise InvalidArgument(field, f"{text[:60]!r} must be name=value")
    value: object = raw
    if raw in ("true", "false"):
        value = raw == "true"
    elif re.fullmatch(r"-?[0-9]{1,19}", raw):
        value = int(raw)
    elif len(raw) >= 2 and raw[0] == raw[-1] == '"':
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
    checked = check_attributes({name.strip(): value}, field)
    return next(iter(checked.items()))


def condition_text(name: str, value: AttributeValue) -> str:
    """``name=value`` as :func:`parse_condition` reads it back to this pair."""
    if isinstance(value, bool):
        return f"{name}={'true' if value else 'false'}"
    if isinstance(value, int):
        return f"{name}={value}"
    return (
        f"{name}={value if parse_condition(f'{name}={value}')[1] == value else json.dumps(value)}"
    )


def merged(
    current: AttributesRecord, changes: Mapping[str, AttributeValue]
) -> AttributesRecord | None:
    """The snapshot after ``changes`` (None: they change nothing);
    :class:`InvalidArgument` when the run would hold too many attributes."""
    gen = current.gen + 1
    changed = {
        k: v
        for k, v in changes.items()
        if k not in current.values or not same_value(current.values[k], v)
    }
    if not changed:
        return None
    values = {**current.values, **changed}
    if len(values) > MAX_ATTRIBUTES:
        raise InvalidArgument("attributes", f"a run holds at most {MAX_ATTRIBUTES} attributes")
    since = {**current.since, **dict.fromkeys(changed, gen)}
    return AttributesRecord(gen=gen, values=values, since=since)


def same_value(a: AttributeValue | None, b: AttributeValue) -> bool:
    """Whether ``a`` is ``b``, of the same type: ``1``, ``True`` and ``"1"`` are
    three values."""
    return type(a) is type(b) and a == b


def _token(value: AttributeValue) -> str:
    """A value as a key segment (typed; a string that is not plain as a digest)."""
    if isinstance(value, bool):
        return "b:true" if value else "b:false"
    if isinstance(value, int):
        return f"i:{value}"
    if _PLAIN_TEXT.fullmatch(value):
        return f"s:{value}"
    return "s#" + hashlib.sha256(value.encode()).hexdigest()[:40]


def attribute_prefix(workflow: str | None, key: str, value: AttributeValue) -> str:
    """The key prefix of the entries of runs (of ``workflow``; None: any) holding
    ``key`` = ``value``."""
    if workflow is None:
        return f"{PREFIX}at/{key}/{_token(value)}/"
    return f"{PREFIX}wa/{facet_segment(workflow)}/{key}/{_token(value)}/"


def attribute_entry_keys(
    run_id: str, workflow: str, started_at: datetime, key: str, value: AttributeValue, gen: int
) -> list[str]:
    """The two entries of a run holding ``key`` = ``value`` since generation ``gen``."""
    tail = f"{stamp(started_at)}/{run_id}/{gen:06d}"
    return [attribute_prefix(w, key, value) + tail for w in (None, workflow)]


def run_position(prefix: str, run_id: str, started_at: datetime) -> str:
    """Keys under ``prefix`` past this one are the entries after run ``run_id``'s
    (a page cursor)."""
    return f"{prefix}{stamp(started_at)}/{run_id}/~"


def start_entry_key(prefix: str, tail: str) -> str:
    """The key under ``prefix`` of the start's entry (generation 0) of the run
    whose entry under another prefix ends in ``tail`` (``{t}/{run}/{gen}``)."""
    return f"{prefix}{tail.rpartition('/')[0]}/{0:06d}"


def parse_attribute_entry(key: str) -> tuple[str, int] | None:
    """The run and generation an attribute entry's key names (None: not one)."""
    parts = key.rsplit("/", 2)
    if len(parts) != 3 or not parts[2].isdigit():
        return None
    return parts[1], int(parts[2])


def attributes_prefix(run_id: str) -> str:
    """The key prefix of a run's snapshots."""
    return f"{run_id}/attrs/"


def snapshot_key(run_id: str, gen: int) -> str:
    """The key of a run's snapshot of generation ``gen`` (the newest sorts first)."""
    return f"{attributes_prefix(run_id)}{_TOP_GEN - gen:06d}"
