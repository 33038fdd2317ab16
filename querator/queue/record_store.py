"""Mutable records kept as immutable items: two slots and a compare-and-set.

A record named ``n`` lives in the item whose dedup key is
``{prefix}{n}{infix}a`` or ``…b`` (:meth:`RecordStore.key`); of the two, the
one with the higher ``gen`` is current (a left-over older one is deleted by
the next writer). A write produces the next generation, with a fresh random
``token``, into the other slot with ``depends=[current (id, version)]``: it
fails if the current record was replaced meanwhile, and if another writer
filled the other slot first, the dedup key keeps theirs. The same
transaction looks the slot up: the write won iff the stored token is its
own; the winner then deletes the old record. So two writers of one
generation never both win, and a reader always finds a record. Records are
never leased.

Built on :meth:`~querator.queue.service.AsyncQueueClient.commit` alone; used
for cron schedules (:mod:`querator.workflows.cron.store`), webhook endpoints
(:mod:`querator.webhooks.registry`) and step progress
(:mod:`querator.workflows.progress`).
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel, ValidationError

from querator.errors import Conflict, QueueNotFound
from querator.queue.models import Item, QueueSettings, Ref, StoredItem
from querator.queue.service import AsyncQueueClient

__all__ = ["SLOTS", "RecordStore", "Stored", "Versioned"]

log = logging.getLogger("querator.records")

SLOTS = ("a", "b")
"""The two slots of every record name."""
PAGE = 500


class Versioned(BaseModel):
    """The fields :class:`RecordStore` keeps in every record it stores (it sets
    them on write). No model config of its own: a record type declares its
    own (frozen, and how it treats fields it does not know)."""

    gen: int = 0
    """Bumped by every write: the highest generation is the current record."""
    token: str = ""
    """Random per write: tells a writer whether its write won."""


R = TypeVar("R", bound=Versioned)


@dataclass(frozen=True, slots=True)
class Stored(Generic[R]):
    """The current record of a name and the item holding it."""

    record: R
    item: StoredItem
    slot: str
    stale: StoredItem | None = None
    """The other slot's older record, if one was left behind."""


class RecordStore(Generic[R]):
    """Records of type ``model`` named by strings, in queue ``queue`` (see the
    module doc): items of kind ``kind`` keyed ``{prefix}{name}{infix}{slot}``.

    ``settings``: the queue's, for :meth:`ensure`; ``silent``: writes do not
    wake the queue's watchers (nobody waits for these records);
    ``logger``: where a record that cannot be read is said, at ERROR.
    """

    def __init__(
        self,
        queue: str,
        model: type[R],
        *,
        kind: str,
        prefix: str = "",
        infix: str = "/",
        settings: QueueSettings | None = None,
        silent: bool = False,
        logger: logging.Logger = log,
    ) -> None:
        self.queue = queue
        self.model = model
        self.kind = kind
        self.prefix = prefix
        self.infix = infix
        self.settings = settings
        self._silent = (queue,) if silent else ()
        self._log = logger

    def key(self, name: str, slot: str) -> str:
        """The dedup key of ``name``'s record in ``slot``."""
        return f"{self.prefix}{name}{self.infix}{slot}"

    async def ensure(self, aq: AsyncQueueClient) -> None:
        """Create the queue (with :attr:`settings`) if it is missing."""
        await aq.create_queue(self.queue, self.settings, exist_ok=True)

    async def read(self, aq: AsyncQueueClient, name: str) -> Stored[R] | None:
        """The current record of ``name`` (None: there is none)."""
        keys = {self.key(name, slot): slot for slot in SLOTS}
        found = await aq.lookup(self.queue, list(keys))
        return self.pick([(keys[key], item) for key, item in found.items()])

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
                if (stored := self.pick(items)) is not None:
                    result[name] = stored
        return result

    async def read_all(self, aq: AsyncQueueClient, told: set[str] | None = None) -> list[Stored[R]]:
        """Every name's current record, ordered by name (none while the queue
        does not exist). A record that cannot be read is skipped, said at ERROR
        once per item id in ``told`` (every time without)."""
        by_name: dict[str, list[tuple[str, StoredItem]]] = {}
        try:
            info = await aq.get_queue(self.queue)
        except QueueNotFound:
            return []
        for partition in range(info.settings.partitions):
            pivot: str | None = None
            while True:
                page = await aq.list_items(self.queue, partition=partition, pivot=pivot, limit=PAGE)
                for item in page:
                    if item.id == pivot or item.kind != self.kind or not item.dedup_key:
                        continue
                    if not item.dedup_key.startswith(self.prefix):
                        continue
                    name, _, slot = item.dedup_key[len(self.prefix) :].rpartition(self.infix)
                    by_name.setdefault(name, []).append((slot, item))
                if len(page) < PAGE:
                    break
                pivot = page[-1].id
        picked = (self.pick(items, told) for _, items in sorted(by_name.items()))
        return [stored for stored in picked if stored is not None]

    def pick(
        self, found: list[tuple[str, StoredItem]], told: set[str] | None = None
    ) -> Stored[R] | None:
        """The current record among one name's ``(slot, item)`` pairs (None: none
        can be read)."""
        decoded = [(slot, item, rec) for slot, item in found if (rec := self._decode(item, told))]
        if not decoded:
            return None
        decoded.sort(key=lambda entry: entry[2].gen)
        slot, item, record = decoded[-1]
        return Stored(record, item, slot, decoded[0][1] if len(decoded) > 1 else None)

    def _decode(self, item: StoredItem, told: set[str] | None = None) -> R | None:
        """The item's record; None for one that cannot be read, said at ERROR
        (once per item id in ``told``). Fields a newer version added are the
        model's business (kept or ignored), so only a damaged record is skipped."""
        try:
            return self.model.model_validate_json(item.payload)
        except ValidationError as exc:
            if told is not None:
                if item.id in told:
                    return None
                told.add(item.id)
            self._log.error(
                "record %s (item %s) cannot be read, skipped: %s",
                item.dedup_key,
                item.id,
                str(exc).splitlines()[0],
            )
            return None

    async def write(
        self,
        aq: AsyncQueueClient,
        name: str,
        current: Stored[R] | None,
        record: R,
        *,
        reference: str | None = None,
    ) -> Stored[R] | None:
        """Replace ``current`` (None: create) with ``record``; the new stored
        record if this write won, None if another writer got there first (read
        again). ``reference``: the item's (default ``name``)."""
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
            reference=name if reference is None else reference,
            dedup_key=key,
        )
        depends = (
            [] if current is None else [Ref(self.queue, current.item.id, current.item.version)]
        )
        try:
            result = await aq.commit(
                depends=depends,
                produce={self.queue: [item]},
                lookup={self.queue: [key]},
                silent=self._silent,
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
