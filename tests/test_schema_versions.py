"""The rules of schema versions (``querator/queue/backends/schema_versions.py``),
without a store: what a store needs, what it is at after, what is refused."""

from __future__ import annotations

import pytest

from querator.errors import QueratorError, SchemaTooNew
from querator.queue.backends.schema_versions import (
    Migration,
    StoreVersion,
    newest,
    plan_migrations,
)

ADDITIVE = (Migration(1, "one", None), Migration(2, "two", "step 2"), Migration(3, "three", "3"))
BREAKING = (*ADDITIVE, Migration(4, "four", "4", additive=False), Migration(5, "five", "5"))


def test_a_new_store_starts_at_the_newest_version_requiring_the_last_breaking_one() -> None:
    assert newest(ADDITIVE) == StoreVersion(3, 1)
    assert newest(BREAKING) == StoreVersion(5, 4)


@pytest.mark.parametrize(
    ("found", "pending", "after"),
    [
        (StoreVersion(1, 1), [2, 3], StoreVersion(3, 1)),
        (StoreVersion(2, 1), [3], StoreVersion(3, 1)),
        (StoreVersion(3, 1), [], StoreVersion(3, 1)),
        (StoreVersion(9, 2), [], StoreVersion(9, 2)),  # newer, still usable: left as it is
    ],
)
def test_an_older_store_gets_the_migrations_after_its_version_in_order(
    found: StoreVersion, pending: list[int], after: StoreVersion
) -> None:
    todo, now = plan_migrations(ADDITIVE, found, "store")
    assert [m.version for m in todo] == pending
    assert now == after


def test_a_breaking_migration_raises_what_the_store_requires() -> None:
    todo, after = plan_migrations(BREAKING, StoreVersion(2, 1), "store")
    assert [m.version for m in todo] == [3, 4, 5]
    assert after == StoreVersion(5, 4)


def test_a_store_requiring_a_version_this_code_does_not_know_is_refused() -> None:
    with pytest.raises(SchemaTooNew) as refused:
        plan_migrations(ADDITIVE, StoreVersion(6, 4), "SQLite store 'x.db'")
    error = refused.value
    assert isinstance(error, QueratorError) and not error.retryable
    assert (error.store_version, error.required_version, error.known_version) == (6, 4, 3)
    assert str(error) == (
        "the SQLite store 'x.db' has schema version 6, which needs a querator that knows"
        " version 4 or newer; this querator knows versions up to 3: upgrade querator"
    )
