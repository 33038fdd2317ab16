"""The public names are a contract: adding is deliberate, renaming never happens."""

from __future__ import annotations

import inspect

import querator
import querator.errors


def test_exported_names_are_pinned() -> None:
    assert sorted(querator.__all__) == [
        "AsyncQuerator",
        "Defer",
        "Item",
        "Leased",
        "PartitionGauges",
        "PartitionStats",
        "Querator",
        "QueueGauges",
        "QueueInfo",
        "QueueSettings",
        "QueueStats",
        "Ref",
        "RetryPolicy",
        "RunHandle",
        "SagaFailed",
        "StoredItem",
        "TransactResult",
        "Worker",
        "gather",
        "saga",
        "sleep",
        "sleep_until",
        "step",
        "workflow",
    ]


def test_error_names_are_pinned() -> None:
    assert sorted(querator.errors.__all__) == [
        "Conflict",
        "ConflictReason",
        "Forbidden",
        "InvalidArgument",
        "QueratorError",
        "QueueExists",
        "QueueNotFound",
        "RequestTimeout",
        "SchemaTooNew",
        "StoreFault",
        "Unauthorized",
        "Unavailable",
        "UsageError",
    ]
    for name in querator.errors.__all__:
        assert inspect.getdoc(getattr(querator.errors, name)), name


def test_every_error_descends_from_the_one_root() -> None:
    for name in querator.errors.__all__:
        obj = getattr(querator.errors, name)
        if inspect.isclass(obj) and issubclass(obj, Exception):
            assert issubclass(obj, querator.errors.QueratorError), name


def test_every_public_name_and_method_has_a_docstring() -> None:
    missing = []
    for name in querator.__all__:
        obj = getattr(querator, name)
        if not inspect.getdoc(obj):
            missing.append(name)
        for attr, member in vars(obj).items():
            public = not attr.startswith("_") and inspect.isfunction(member)
            if public and not inspect.getdoc(member):
                missing.append(f"{name}.{attr}")
    assert missing == []


def test_sync_and_async_clients_offer_the_same_methods() -> None:
    def public(cls: type) -> set[str]:
        return {
            n
            for n, m in inspect.getmembers(cls, inspect.isfunction)
            if not n.startswith("_") and n not in {"queue_info"}
        }

    sync_only = {"close", "call"}  # call: run a coroutine function on the client's loop
    # watch: waiting on wakeups is an async affair; commit: the engine's transact
    async_only = {"open", "close", "watch", "commit"}
    assert public(querator.Querator) - sync_only == public(querator.AsyncQuerator) - async_only
