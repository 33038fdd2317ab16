"""The namespaces one ``querator serve`` serves: a request names its namespace
in the ``Querator-Namespace`` header (absent: the server's own, the one its
``--url``/``--namespace`` names).

A server serves its own namespace, and the others it was told to serve
(``--serve-namespaces acme,globex``, or ``*``: every one its store holds);
another is refused (Forbidden). It opens one library client per namespace it
is asked for, the first time, and keeps it until it stops. It never creates a
namespace: on PostgreSQL and SQLite a namespace must exist (``querator
namespaces create``); a ``memory://`` server gives each namespace a store of
its own. Tokens are the server's (those of its own namespace): a token valid
on the server is valid for every namespace it serves, with the same scope,
unless it was made for some namespaces only (``--for-namespaces``,
:mod:`querator.http.auth`), so serving another namespace is the operator's
explicit choice.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from contextlib import AsyncExitStack
from typing import Any, Final, Generic, TypeVar

import anyio
import anyio.to_thread

from querator.errors import Forbidden, InvalidArgument
from querator.queue.backends.namespace_admin import list_namespaces
from querator.queue.backends.namespaces import check_namespace, split_namespace, with_namespace
from querator.queue.service import AsyncQueueClient

__all__ = ["EVERY", "MAX_SERVED", "NAMESPACE_HEADER", "Namespaces", "served_namespaces"]

NAMESPACE_HEADER: Final = "Querator-Namespace"
"""The request header naming the namespace a call is for."""

MAX_SERVED: Final = 64
"""The most namespaces one server opens besides its own (a connection pool each)."""

EVERY: Final = "*"
"""Serve every namespace the store holds."""

S = TypeVar("S")


def served_namespaces(text: str) -> frozenset[str] | None:
    """The namespaces ``--serve-namespaces`` names (comma-separated; ``*``:
    every one, None); InvalidArgument for a bad name."""
    if text.strip() == EVERY:
        return None
    names = [name.strip() for name in text.split(",") if name.strip()]
    return frozenset(check_namespace(name) for name in names)


class Namespaces(Generic[S]):
    """The server's state ``S`` per namespace: its own (``root``) and the
    others, each made by ``derive`` from its client, opened on first use into
    ``stack`` (closed with the server). ``allowed``: the namespaces it may
    serve besides its own (None: every one the store holds)."""

    def __init__(
        self,
        url: str,
        root: S,
        derive: Callable[[AsyncQueueClient], S],
        stack: AsyncExitStack,
        client_options: dict[str, Any] | None = None,
        allowed: Collection[str] | None = (),
    ) -> None:
        self.store, self.own = split_namespace(url)
        """The store's URL (no namespace in it) and the server's own namespace."""
        self.root = root
        self._derive = derive
        self._stack = stack
        self._options = dict(client_options or {})
        self._allowed = None if allowed is None else frozenset(allowed)
        self._served: dict[str, S] = {}
        self._opening = anyio.Lock()

    async def state_of(self, header: str | None) -> S:
        """The state of the namespace ``header`` names (None: the server's own);
        InvalidArgument for a bad name, one the store does not hold, or one
        past :data:`MAX_SERVED`; Forbidden for one the server does not serve."""
        if header is None:
            return self.root
        name = check_namespace(header)
        if name == self.own:
            return self.root
        if self._allowed is not None and name not in self._allowed:
            raise Forbidden(
                f"access denied; this server serves namespace {self.own!r}, not {name!r}"
                " (querator serve --serve-namespaces)"
            )
        found = self._served.get(name)
        if found is not None:
            return found
        async with self._opening:
            found = self._served.get(name)
            if found is None:
                found = self._served[name] = await self._open(name)
        return found

    async def _open(self, name: str) -> S:
        if len(self._served) >= MAX_SERVED:
            raise InvalidArgument(
                "namespace", f"this server serves at most {MAX_SERVED} namespaces besides its own"
            )
        if not self.store.lower().startswith("memory:"):
            held = await anyio.to_thread.run_sync(list_namespaces, self.store)
            if name not in held:
                raise InvalidArgument(
                    "namespace",
                    f"no namespace {name!r} in the server's store"
                    f" (an administrator creates it: querator namespaces create {name})",
                )
        client = AsyncQueueClient(with_namespace(self.store, name), **self._options)
        return self._derive(await self._stack.enter_async_context(client))
