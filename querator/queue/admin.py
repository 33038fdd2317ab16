"""Queue management (create, update, delete, get, list) and the settings cache.

The cache keeps each queue's info for ``cache_ttl`` seconds so the hot path
does not read settings on every call. Changes made through this client
invalidate it at once; changes made by other processes are seen within
``cache_ttl`` (partition growth included). Every change of a queue's catalog
entry (pause, resume, update, delete) wakes every client listening for
wakeups, which drops its info at once (:meth:`QueueAdmin.forget`): a client
that listens keeps the info for up to :data:`LISTENING_TTL` instead, so that
a worker woken after a quiet while leases without reading settings first.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio

from querator.errors import InvalidArgument, QueueExists, QueueNotFound
from querator.queue.backends.base import Backend
from querator.queue.models import QueueInfo, QueueSettings
from querator.queue.validation import check_count, check_name

LISTENING_TTL = 60.0
"""Seconds a client keeps a queue's info cached while its wakeup listener is
in place (each change is then told to it), ``cache_ttl`` if longer."""


class QueueAdmin:
    """Queue management of one client (a part of
    :class:`~querator.queue.service.AsyncQueueClient`, which documents each
    call); ``opened`` returns the backend, or raises when the client is closed."""

    def __init__(
        self,
        opened: Callable[[], Backend],
        *,
        cache_ttl: float,
        listening: Callable[[], bool] = lambda: False,
    ) -> None:
        self._require_open = opened
        self._cache_ttl = cache_ttl
        self._listening = listening
        """Whether the client's wakeup listener is in place now."""
        self._cache: dict[str, tuple[QueueInfo, float]] = {}
        self._fetching: dict[str, anyio.Event] = {}
        """Queue -> set when the look-up of its info under way ends (one at a time)."""

    async def queue_info(self, name: str) -> QueueInfo:
        """The queue's info, from the cache when fresh.

        When it is not, one caller looks it up; the others meanwhile get the
        stale info, or, if there is none, wait for that look-up.
        """
        while True:
            hit = self._cache.get(name)
            if hit is not None and self._fresh(hit[1]):
                return hit[0]
            fetching = self._fetching.get(name)
            if fetching is None:
                break
            if hit is not None:
                return hit[0]
            await fetching.wait()
            # That look-up failed if the name is still not cached: look again (the
            # first waiter to get here makes its own look-up, the others wait for it).
        backend = self._require_open()
        check_name("queue", name)
        done = self._fetching[name] = anyio.Event()
        try:
            info = await backend.get_queue(name)
            self._cache[name] = (info, time.monotonic())
        except QueueNotFound:
            self._cache.pop(name, None)
            raise
        finally:
            if self._fetching.get(name) is done:
                del self._fetching[name]
            done.set()
        return info

    def cached(self, name: str) -> QueueInfo | None:
        """The queue's info if the cache holds it fresh, else None (no look-up;
        safe from any thread)."""
        hit = self._cache.get(name)
        if hit is not None and self._fresh(hit[1]):
            return hit[0]
        return None

    def _fresh(self, since: float) -> bool:
        """Whether info cached at ``since`` (``time.monotonic()``) may serve a call."""
        age = time.monotonic() - since
        return age < self._cache_ttl or (age < LISTENING_TTL and self._listening())

    def forget(self, name: str | None) -> None:
        """Drop the cached info of ``name`` (None: of every queue); the next
        look-up reads the store (a pause or resume by another client)."""
        if name is None:
            self._cache.clear()
        else:
            self._cache.pop(name, None)

    async def set_paused(self, name: str, paused: bool) -> QueueInfo:
        """Pause or resume ``name``: a paused queue's items are not leased (leases
        wait as if it were empty); produce still adds items. Every client of the
        store is told at once where it listens for wakeups, else sees it within
        its ``cache_ttl``."""
        backend = self._require_open()
        check_name("name", name)
        info = await backend.pause_queue(name, paused)
        self._cache[name] = (info, time.monotonic())
        return info

    async def create_queue(
        self, name: str, settings: QueueSettings | None = None, *, exist_ok: bool = False
    ) -> QueueInfo:
        """Create a queue; raises QueueExists when the name is taken, unless
        ``exist_ok``, which returns the existing queue as it is (settings unchanged)."""
        backend = self._require_open()
        check_name("name", name)
        settings = _settings(settings)
        await self._check_dead_queue(name, settings)
        try:
            info = await backend.create_queue(name, settings)
        except QueueExists:
            if not exist_ok:
                raise
            info = await backend.get_queue(name)
        self._cache.pop(name, None)
        return info

    async def update_queue(self, name: str, settings: QueueSettings) -> QueueInfo:
        """Replace a queue's settings. They apply to new leases and new items;
        existing leases keep their deadlines. Partitions may only grow."""
        backend = self._require_open()
        check_name("name", name)
        settings = _settings(settings)
        current = await backend.get_queue(name)
        if settings.partitions < current.settings.partitions:
            raise InvalidArgument(
                "partitions", f"may only grow (now {current.settings.partitions})"
            )
        await self._check_dead_queue(name, settings)
        info = await backend.update_queue(name, settings)
        self._cache.pop(name, None)
        return info

    async def delete_queue(self, name: str, *, force: bool = False) -> None:
        """Delete a queue. One that still holds items raises QueueNotEmpty (naming
        how many; nothing is deleted) unless ``force``, which drops them with it.
        A queue that is another queue's dead queue cannot be deleted until that
        queue names another."""
        backend = self._require_open()
        check_name("name", name)
        if not isinstance(force, bool):
            raise InvalidArgument("force", f"must be a bool, got {type(force).__name__}")
        users = [q for q in await backend.queues_with_dead_queue(name) if q != name]
        if users:
            raise InvalidArgument(
                "name", f"{name!r} is the dead queue of {', '.join(map(repr, users))}"
            )
        self._cache.pop(name, None)
        await backend.delete_queue(name, force=force)

    async def get_queue(self, name: str) -> QueueInfo:
        """The queue's current info (always read from the store)."""
        backend = self._require_open()
        check_name("name", name)
        info = await backend.get_queue(name)
        self._cache[name] = (info, time.monotonic())
        return info

    async def list_queues(self, pivot: str | None = None, limit: int = 100) -> list[QueueInfo]:
        """Queues in name order, starting at ``pivot`` (inclusive)."""
        backend = self._require_open()
        if pivot is not None:
            check_name("pivot", pivot)
        check_count("limit", limit, 1, 1_000)
        return await backend.list_queues(pivot, limit)

    async def _check_dead_queue(self, name: str, settings: QueueSettings) -> None:
        dead = settings.dead_queue
        if dead is None:
            return
        if dead == name:
            raise InvalidArgument("dead_queue", "a queue cannot be its own dead queue")
        backend = self._require_open()
        try:
            target = await backend.get_queue(dead)
        except QueueNotFound:
            raise InvalidArgument("dead_queue", f"queue {dead!r} does not exist") from None
        if target.settings.dead_queue is not None:
            raise InvalidArgument(
                "dead_queue", f"{dead!r} has a dead queue of its own; dead queues cannot chain"
            )
        users = await backend.queues_with_dead_queue(name)
        if users:
            raise InvalidArgument(
                "dead_queue",
                f"{name!r} is the dead queue of {users[0]!r}; dead queues cannot chain",
            )


def _settings(settings: object) -> QueueSettings:
    if settings is None:
        return QueueSettings()
    if not isinstance(settings, QueueSettings):
        raise InvalidArgument("settings", f"must be QueueSettings, got {type(settings).__name__}")
    return settings
