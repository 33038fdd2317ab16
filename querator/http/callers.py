"""What the HTTP clients' call mixins need of the client that owns them.

The families of calls (:mod:`~querator.http.dead_calls`,
:mod:`~querator.http.lock_calls`, :mod:`~querator.http.message_calls`,
:mod:`~querator.http.runs_client`, :mod:`~querator.http.webhooks_client`, ...)
are written once against these two protocols, so none of them imports
:mod:`querator.http.client`: :class:`Poster` is
:class:`querator.http.AsyncQuerator` (one RPC), :class:`LoopOwner` is
:class:`querator.http.Querator` (its async client and the loop thread that
runs it). A mixin whose methods call each other (the workflow calls)
subclasses :class:`Poster`: its ``_post`` is abstract, so a class that
leaves it out cannot be made.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


class Poster(Protocol):
    """An async HTTP client: POST a body to a path, read the reply as a model."""

    @abstractmethod
    async def _post(self, path: str, body: dict[str, Any], answer: type[M], wait: float = 0.0) -> M:
        """POST ``body`` to ``path`` and read the reply as ``answer`` (``wait``: the
        seconds the server may hold a long poll)."""


class LoopOwner(Protocol):
    """A sync HTTP client: its async client (``aio``) and a way to run one of
    its coroutines to completion on the client's loop thread."""

    @property
    def aio(self) -> Any: ...

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T: ...
