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
        "TaskHandle",
        "TransactResult",
        "Worker",
        "gather",
        "saga",
        "sleep",
        "sleep_until",
        "step",
        "task",
        "workflow",
    ]


def test_error_names_are_pinned() -> None:
    assert sorted(querator.errors.__all__) == [
        "Conflict",
        "ConflictReason",
        "Forbidden",
        "InvalidArgument",
        "LockLost",
        "QueratorError",
        "QueueExists",
        "QueueNotEmpty",
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


def test_locks_exports() -> None:
    import querator.locks

    assert sorted(querator.locks.__all__) == [
        "Acquire",
        "AsyncAcquire",
        "AsyncLock",
        "AsyncSemaphore",
        "Holder",
        "Lock",
        "Permit",
        "Semaphore",
        "SemaphoreInfo",
        "Waiter",
        "list_semaphores",
        "list_semaphores_async",
    ]
    for name in querator.locks.__all__:
        assert getattr(querator.locks, name).__doc__, name


def test_limits_exports() -> None:
    import querator.limits

    assert sorted(querator.limits.__all__) == [
        "AsyncRateLimiter",
        "Concurrency",
        "RateDecision",
        "RateLimit",
        "RateLimiter",
    ]
    for name in querator.limits.__all__:
        assert getattr(querator.limits, name).__doc__, name


def test_sync_and_async_clients_offer_the_same_methods() -> None:
    def public(cls: type) -> set[str]:
        return {
            n
            for n, m in inspect.getmembers(cls, inspect.isfunction)
            if not n.startswith("_") and n not in {"queue_info"}
        }

    # call, serve: run a coroutine function on the client's loop (serve: a long one)
    sync_only = {"close", "call", "serve"}
    # watch: waiting on wakeups is an async affair; commit: the engine's transact;
    # run_in_background: a service's task (the lock renewer) on the client's loop;
    # produce_steps: statements querator.queue.foreign runs on the application's connection
    # on_wakeup: a hook called on the client's loop (the worker's reads ahead)
    async_only = {
        "open",
        "close",
        "watch",
        "on_wakeup",
        "commit",
        "run_in_background",
        "produce_steps",
    }
    assert public(querator.Querator) - sync_only == public(querator.AsyncQuerator) - async_only


def _docstring_imports() -> list[tuple[str, str]]:
    """``from querator… import …`` lines (one line each) in the docstrings of
    querator's modules: (module, line)."""
    import importlib
    import pkgutil
    import re

    found = []
    for info in pkgutil.walk_packages(querator.__path__, "querator."):
        if info.name.endswith("__main__"):
            continue
        doc = importlib.import_module(info.name).__doc__ or ""
        for line in doc.splitlines():
            match = re.match(r"\s*(from querator[\w.]* import [\w, ]+?)\s*(#.*)?$", line)
            if match:
                found.append((info.name, match.group(1)))
    return found


def test_imports_shown_in_module_docstrings_work() -> None:
    lines = _docstring_imports()
    assert (
        "querator.workflows.inspection",
        "from querator.workflows import get_run, list_runs",
    ) in lines
    broken = []
    for module, line in lines:
        try:
            exec(line, {})
        except ImportError as exc:
            broken.append(f"{module}: {line}: {exc}")
    assert broken == []
