"""The library clients and the HTTP clients satisfy one typed interface
(:mod:`querator.interface`): mypy checks the assignments below, the test
checks that each class has every method of it."""

from __future__ import annotations

import inspect

import querator
import querator.http
from querator.interface import AsyncClient, Client


def _async_clients(
    library: querator.AsyncQuerator, http: querator.http.AsyncQuerator
) -> list[AsyncClient]:
    return [library, http]  # mypy: both are AsyncClients


def _sync_clients(library: querator.Querator, http: querator.http.Querator) -> list[Client]:
    return [library, http]  # mypy: both are Clients


def _members(protocol: type) -> set[str]:
    return {
        name
        for name, _ in inspect.getmembers(protocol)
        if not name.startswith("_") or name in ("__aenter__", "__enter__")
    } - {"mro"}


def test_every_client_has_every_operation_of_the_interface() -> None:
    for protocol, classes in [
        (AsyncClient, [querator.AsyncQuerator, querator.http.AsyncQuerator]),
        (Client, [querator.Querator, querator.http.Querator]),
    ]:
        wanted = _members(protocol)
        assert {"start", "run", "list_runs", "webhooks", "produce", "lease"} <= wanted
        for cls in classes:
            missing = {name for name in wanted if not hasattr(cls, name)}
            if cls is querator.http.AsyncQuerator or cls is querator.http.Querator:
                missing.discard("webhooks")  # an attribute set by __init__
            assert not missing, f"{cls.__qualname__} lacks {sorted(missing)}"
