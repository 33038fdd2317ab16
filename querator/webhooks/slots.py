"""Mutable records kept as immutable items: two slots and a compare-and-set.

The same scheme as cron schedules (:mod:`querator.workflows.cron.store`),
for any record type: a record named ``n`` lives in the item whose dedup key
is ``{prefix}/{n}/a`` or ``…/b``; the one with the higher ``gen`` is current.
A write produces the next generation into the other slot with
``transact(depends=[current])`` (it fails if someone else replaced the
current record) and then looks its slot up: it won iff the stored token is
its own (the dedup key returned a rival's record otherwise). The winner
deletes the old record. Records are never leased.
"""

from __future__ import annotations

import contextlib
import secrets
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from querator.errors import Conflict
from querator.queue.models import Item, QueueSettings, Ref, StoredItem
from querator.queue.service import AsyncQueueClient

__all__ = ["Slots", "Stored", "Versioned"]

SLOTS = ("a", "b")
PAGE = 500


class Versioned(BaseModel):
    """A stored record: ``gen`` orders its versions, ``token`` tells writers apart.
    Unknown fields are ignored, so an older process reads a newer one's records."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    gen: int = 0
    token: str = ""


R = TypeVar("R", bound=Versioned)


@dataclass(frozen=True, slots=True)
class Stored(Generic[R]):
    """The current record of a name and the item holding it."""

    record: R
    item: StoredItem
    slot: str
    stale: StoredItem | None = None
    """The other slot's older record, if one was left behind."""


class Slots(Generic[R]):
    """Records of type ``model`` named by strings, in queue ``queue``."""

    def __init__(self, queue: str, settings: QueueSettings, prefix: str, model: type[R]) -> None:
        self.queue = queue
        self.settings = settings
        self.prefix = prefix
        self.model = model
        self.kind = f"querator.{prefix}"

    def key(self, name: str, slot: str) -> str:
        """The dedup key of ``name``'s record in ``slot``."""
        return f"{self.prefix}/{name}/{slot}"

    async def ensure(self, aq: AsyncQueueClient) -> None:
        """Create the queue if it is missing."""
        await aq.create_queue(self.queue, self.settings, exist_ok=True)

    def _decode(self, item: StoredItem) -> R | None:
        try:
            return self.model.model_validate_json(item.payload)
        except ValidationError:
            return None

    def _pick(self, found: list[tuple[str, StoredItem]]) -> Stored[R] | None:
        decoded = [(slot, item, rec) for slot, item in found if (rec := self._decode(item))]
        if not decoded:
            return None
        decoded.sort(key=lambda entry: entry[2].gen)
        slot, item, record = decoded[-1]
        return Stored(record, item, slot, decoded[0][1] if len(decoded) > 1 else None)

    async def read(self, aq: AsyncQueueClient, name: str) -> Stored[R] | None:
        """The current record of ``name`` (None: there is none)."""
        keys = {self.key(name, slot): slot for slot in SLOTS}
        found = await aq.lookup(self.queue, list(keys))
        return self._pick([(keys[key], item) for key, item in found.items()])

    async def read_many(self, aq: AsyncQueueClient, names: list[str]) -> dict[str, Stored[R]]:
        """The current records of ``names`` that exist, by name (one lookup per 500)."""
        result: dict[str, Stored[R]] = {}
        for start in range(0, len(names), PAGE):
            chunk = names[start : start + PAGE]
            keys = {self.key(n, s): (n, s) for n in chunk for s in SLOTS}
            found = await aq.lookup(self.queue, list(keys))
            by_name: dict[str, list[tuple[str, StoredItem]]] = {}
            for key, item in found.items():
                name, slot = keys[key]
                by_name.setdefault(name, []).append((slot, item))
            for name, items in by_name.items():
                if (stored := self._pick(items)) is not None:
                    result[name] = stored
        return result

    async def read_all(self, aq: AsyncQueueClient) -> list[Stored[R]]:
        """Every name's current record, ordered by name."""
        by_name: dict[str, list[tuple[str, StoredItem]]] = {}
        info = await aq.get_queue(self.queue)
        for partition in range(info.settings.partitions):
            pivot: str | None = None
            while True:
                page = await aq.list_items(self.queue, partition=partition, pivot=pivot, limit=PAGE)
                for item in page:
                    if item.id == pivot or item.kind != self.kind or not item.dedup_key:
                        continue
                    name, _, slot = item.dedup_key[len(self.prefix) + 1 :].rpartition("/")
                    by_name.setdefault(name, []).append((slot, item))
                if len(page) < PAGE:
                    break
                pivot = page[-1].id
        picked = (self._pick(items) for _, items in sorted(by_name.items()))
        return [stored for stored in picked if stored is not None]

    async def write(
        self, aq: AsyncQueueClient, name: str, current: Stored[R] | None, record: R
    ) -> Stored[R] | None:
        """Replace ``current`` (None: create) with ``record``; the new stored
        record if this write won, None if another writer got there first."""
        if current is not None and current.stale is not None:
            await self._delete(aq, current.stale)
        slot = SLOTS[0] if current is None or current.slot == SLOTS[1] else SLOTS[1]
        gen = 0 if current is None else current.record.gen + 1
        new = record.model_copy(update={"gen": gen, "token": secrets.token_hex(8)})
        key = self.key(name, slot)
        item = Item(
            payload=new.model_dump_json().encode(),
            kind=self.kind,
            encoding="json",
            reference=name,
            dedup_key=key,
        )
        depends = (
            [] if current is None else [Ref(self.queue, current.item.id, current.item.version)]
        )
        try:
            result = await aq.commit(
                depends=depends, produce={self.queue: [item]}, lookup={self.queue: [key]}
            )
        except Conflict:
            return None
        stored = result.found.get(self.queue, {}).get(key)
        got = self._decode(stored) if stored is not None else None
        if stored is None or got is None or got.token != new.token:
            return None
        if current is not None:
            await self._delete(aq, current.item)
        return Stored(got, stored, slot)

    async def remove(self, aq: AsyncQueueClient, current: Stored[R]) -> None:
        """Delete ``current``'s records (both slots)."""
        await self._delete(aq, current.item)
        if current.stale is not None:
            await self._delete(aq, current.stale)

    async def _delete(self, aq: AsyncQueueClient, item: StoredItem) -> None:
        with contextlib.suppress(Conflict):  # already gone
            await aq.delete_items(self.queue, [item.id])
