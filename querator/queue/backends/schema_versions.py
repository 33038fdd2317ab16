"""Schema versions and the ordered migrations between them, for every stored backend.

Each backend with a schema (PostgreSQL, SQLite) keeps an ordered tuple of
:class:`Migration` (``postgres/migrations.py``, ``sqlite/migrations.py``) and
records in its store the version it is at, and the oldest version a client
must know to use it (``requires``). At open, under a lock that makes other
processes wait, a new store is created at the newest version without running
any migration; an older one is migrated forward; a store whose ``requires``
is newer than this querator knows is refused with
:class:`~querator.errors.SchemaTooNew`.

A migration is *additive* when clients of the previous release keep working on
the migrated store (new columns with defaults, new indexes, a collation that
compares the same strings): a rolling deploy then needs no downtime, and such a
store does not raise the ``requires`` it records. Every migration so far is
additive. This module holds the decisions, without I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Generic, NamedTuple, TypeVar

from querator.errors import SchemaTooNew

__all__ = ["Migration", "SchemaReport", "StoreVersion", "newest", "plan_migrations", "report"]

log = logging.getLogger("querator")

StepT = TypeVar("StepT")


class Migration(NamedTuple, Generic[StepT]):
    """One step from the previous schema version to :attr:`version`."""

    version: int
    name: str
    """What it changes, for operators (``querator migrate`` lists it)."""
    step: StepT | None
    """What applies it, as the backend runs it (None: version 1, the baseline,
    which no store migrates to: a store without a version has it)."""
    additive: bool = True
    """Clients that know only the previous version keep working after it."""


class StoreVersion(NamedTuple):
    """What a store records about its schema."""

    version: int
    requires: int
    """The oldest version a client must know to use the store."""


class SchemaReport(NamedTuple):
    """What opening or migrating a store found and did (``querator migrate``)."""

    store: str
    """The store, as named in messages (no password)."""
    before: int | None
    """The store's version before, or None when there was no store."""
    after: int
    """Its version after (what it would be, on a dry run)."""
    pending: tuple[tuple[int, str], ...]
    """(version, name) of the migrations that were (or would be) applied."""
    applied: bool
    """False on a dry run: nothing was changed."""


def newest(migrations: Sequence[Migration[StepT]]) -> StoreVersion:
    """The version a new store is created at, and what it requires."""
    required = [m.version for m in migrations if not m.additive]
    return StoreVersion(migrations[-1].version, max(required, default=1))


def plan_migrations(
    migrations: Sequence[Migration[StepT]], found: StoreVersion, store: str
) -> tuple[list[Migration[StepT]], StoreVersion]:
    """The migrations ``found`` needs, in order, and the version it is at after them.

    Raises :class:`SchemaTooNew` when the store requires a version this code
    does not know; a newer store that does not is used as it is.
    """
    known = newest(migrations)
    if found.requires > known.version:
        raise SchemaTooNew(store, found.version, found.requires, known.version)
    todo = [m for m in migrations if m.version > found.version]
    requires = max([found.requires, *(m.version for m in todo if not m.additive)])
    return todo, StoreVersion(max(found.version, known.version), requires)


def report(
    store: str,
    found: StoreVersion | None,
    todo: Sequence[Migration[StepT]],
    after: StoreVersion,
    applied: bool,
) -> SchemaReport:
    """The :class:`SchemaReport` of a store found at ``found`` (None: no store yet);
    logs the migrations applied."""
    if applied and todo and found is not None:
        log.info(
            "querator: the %s migrated from schema version %d to %d",
            store,
            found.version,
            after.version,
        )
    return SchemaReport(
        store,
        None if found is None else found.version,
        after.version,
        tuple((m.version, m.name) for m in todo),
        applied,
    )
