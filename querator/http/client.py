"""The async HTTP client: the methods of :class:`querator.AsyncQuerator`
(queues, dead letters, workflow runs, schedules, webhooks, locks, rate
limits, background tasks), with the same arguments, return types and
exceptions, over ``querator serve``.

Arguments are checked with the library's own validators before anything is
sent; the server checks them again (it serves curl too). Replies are turned
back into :mod:`querator.errors` exceptions by one table
(:mod:`querator.http.status`).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Collection, Coroutine, Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
import httpx
from anyio.abc import TaskGroup
from google.protobuf.message import DecodeError
from pydantic import BaseModel, ValidationError
from typing_extensions import Unpack

from querator.errors import InvalidArgument, RequestTimeout, Unavailable, UsageError
from querator.http import status
from querator.http.bodies import (
    info,
    key_list,
    leased_of,
    refs,
    settings_body,
    stored_of,
    wire_items,
)
from querator.http.dead_calls import AsyncDeadCalls
from querator.http.durations import format_duration
from querator.http.encoding import EXTRAS_HEADER, JSON, PROTOBUF, encode, mime, reply_data
from querator.http.lock_calls import AsyncLockCalls
from querator.http.lock_permits import ServedPermits
from querator.http.message_calls import AsyncMessageCalls
from querator.http.namespaces import NAMESPACE_HEADER
from querator.http.proto.reply_pb2 import Reply as ReplyMessage
from querator.http.protocol import QUERATOR_CALLS
from querator.http.rate_calls import AsyncRateCalls
from querator.http.runs_client import WorkflowCalls
from querator.http.task_calls import AsyncTaskCalls
from querator.http.webhooks_client import AsyncHttpWebhooks
from querator.http.wire import admin as wa
from querator.http.wire import queue as wq
from querator.http.wire.types import LONG_POLL_MAX, LONG_POLL_MIN
from querator.queue.backends.namespaces import check_namespace
from querator.queue.models import (
    Item,
    Leased,
    QueueGauges,
    QueueInfo,
    QueueSettings,
    QueueStats,
    Ref,
    StoredItem,
    TransactResult,
)
from querator.queue.options import TransactOptions, check_options
from querator.queue.plans import RefLike
from querator.queue.validation import (
    MAX_BATCH,
    check_batch,
    check_count,
    check_duration,
    check_instant,
    check_kinds,
    check_name,
    check_reason,
    check_sequence,
    key_range,
)
from querator.telemetry import inject, messaging

M = TypeVar("M", bound=BaseModel)

NO_DELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
"""Socket options of the client's connections."""
DEFAULT_URL = "http://127.0.0.1:2319"
"""Where ``querator serve`` listens by default."""
SHORTEST_POLL = LONG_POLL_MIN + 0.001
"""The ``request_timeout`` sent for ``timeout=0`` (the server's minimum is above 10 ms)."""
ENCODINGS = ("json", "protobuf")
"""What the client may send: JSON, or protobuf on the calls of Querator's protocol."""


class AsyncQuerator(
    WorkflowCalls,
    AsyncMessageCalls,
    AsyncLockCalls,
    AsyncRateCalls,
    AsyncTaskCalls,
    AsyncDeadCalls,
):
    """A client of a querator HTTP server, for ``async`` code.

    ``url`` is the server's base URL; ``token`` a bearer token (``qrt_…``)
    when the server requires one; ``encoding`` ``"json"`` (the default) or
    ``"protobuf"`` (the calls of Querator's protocol are then sent and answered
    in protobuf; querator's own calls stay JSON); ``namespace`` the namespace
    every call is for (sent as the ``Querator-Namespace`` header; None: the
    server's own). Use it as
    ``async with AsyncQuerator(url)`` (or ``await open()`` / ``await close()``).
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        encoding: str = "json",
        namespace: str | None = None,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidArgument("url", f"must be an http:// or https:// URL, got {url!r}")
        if encoding not in ENCODINGS:
            raise InvalidArgument("encoding", f"must be one of {ENCODINGS}, got {encoding!r}")
        self._url = url.rstrip("/")
        self._protobuf = encoding == "protobuf"
        self._headers = {EXTRAS_HEADER: "true"}  # querator's fields: versions, ids, ...
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        if namespace is not None:
            self._headers[NAMESPACE_HEADER] = check_namespace(namespace)
        self.namespace = namespace
        """The namespace the calls are for (None: the server's own)."""
        self._timeout = check_duration("timeout", timeout)
        self._http: httpx.AsyncClient | None = None
        self._tasks: TaskGroup | None = None
        self._permits: ServedPermits | None = None
        self.webhooks = AsyncHttpWebhooks(self)
        """Webhook endpoints, messages and re-drives (``AsyncWebhooks``'s methods)."""

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def open(self) -> None:
        """Open the connection pool."""
        if self._http is not None:
            raise UsageError("this client is already open")
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
        # h11 writes a request's headers and body separately: without TCP_NODELAY
        # the body waits for the server's delayed ACK (40 ms per call on Linux).
        transport = httpx.AsyncHTTPTransport(limits=limits, socket_options=NO_DELAY)
        self._http = httpx.AsyncClient(
            base_url=self._url, headers=self._headers, timeout=self._timeout, transport=transport
        )
        tasks = anyio.create_task_group()
        await tasks.__aenter__()
        self._tasks = tasks

    async def close(self) -> None:
        """Stop the background tasks (the renewal of held lock permits) and
        close the connection pool."""
        tasks, self._tasks = self._tasks, None
        if tasks is not None:
            tasks.cancel_scope.cancel()
            await tasks.__aexit__(None, None, None)
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

    def run_in_background(self, service: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``await service()`` as a background task of this client until it
        closes (the renewer of lock permits); call it on the client's loop."""
        if self._tasks is None:
            raise UsageError("the client is not open: use `async with AsyncQuerator(...)`")
        self._tasks.start_soon(service)

    def permit_source(self) -> ServedPermits:
        """Where ``Lock(q, name)`` and ``Semaphore(q, name, limit)`` of
        :mod:`querator.locks` hold their permits when ``q`` is this client:
        through the server's ``/v1/locks.*`` calls."""
        if self._permits is None:
            self._permits = ServedPermits(self)
        return self._permits

    async def _post(
        self,
        path: str,
        body: dict[str, Any],
        answer: type[M],
        wait: float = 0.0,
    ) -> M:
        """POST ``body`` to ``path``, in protobuf when the client sends it and
        the call has messages."""
        http = self._http
        if http is None:
            raise UsageError("the client is not open: use `async with AsyncQuerator(...)`")
        headers: dict[str, str] = {}
        inject(headers)  # the server's spans join the caller's trace
        messages = QUERATOR_CALLS.get(path) if self._protobuf else None
        if messages is not None:
            headers |= {"Content-Type": PROTOBUF, "Accept": PROTOBUF}
            content = encode(body, messages.request)
        else:
            headers["Content-Type"] = JSON
            content = json.dumps(body).encode()
        try:
            response = await http.post(
                path, content=content, timeout=self._timeout + wait, headers=headers
            )
        except httpx.TransportError as exc:
            raise Unavailable(f"{self._url}{path}: {type(exc).__name__}: {exc}") from exc
        protobuf = mime(response.headers.get("content-type")) == PROTOBUF
        if response.status_code != status.OK:
            try:
                if protobuf:
                    reply = wq.Reply.model_validate(reply_data(response.content, ReplyMessage))
                else:
                    reply = wq.Reply.model_validate_json(response.content)
            except (ValidationError, DecodeError):
                text = response.text[:200]
                reply = status.reply(response.status_code, text or response.reason_phrase)
            raise status.error_of(response.status_code, reply)
        if protobuf and messages is not None:
            return answer.model_validate(reply_data(response.content, messages.reply))
        return answer.model_validate_json(response.content)

    async def create_queue(
        self, name: str, settings: QueueSettings | None = None, *, exist_ok: bool = False
    ) -> QueueInfo:
        """See :meth:`querator.AsyncQuerator.create_queue`."""
        body = {**settings_body(check_name("name", name), settings), "exist_ok": exist_ok}
        return info(await self._post("/v1/queues.create", body, wa.CreateReply))

    async def update_queue(self, name: str, settings: QueueSettings) -> QueueInfo:
        """See :meth:`querator.AsyncQuerator.update_queue`."""
        body = settings_body(check_name("name", name), settings)
        return info(await self._post("/v1/queues.update", body, wa.CreateReply))

    async def delete_queue(self, name: str, *, force: bool = False) -> None:
        """See :meth:`querator.AsyncQuerator.delete_queue`."""
        if not isinstance(force, bool):
            raise InvalidArgument("force", f"must be a bool, got {type(force).__name__}")
        body = {"queue_name": check_name("name", name), "force": force}
        await self._post("/v1/queues.delete", body, wq.Reply)

    async def get_queue(self, name: str) -> QueueInfo:
        """See :meth:`querator.AsyncQuerator.get_queue`."""
        body = {"queue_name": check_name("name", name)}
        return (await self._post("/v1/queues.info", body, wa.QueueInfo)).library()

    async def pause_queue(self, name: str) -> QueueInfo:
        """See :meth:`querator.AsyncQuerator.pause_queue`."""
        body = {"queue_name": check_name("name", name)}
        return (await self._post("/v1/queues.pause", body, wa.QueueInfo)).library()

    async def resume_queue(self, name: str) -> QueueInfo:
        """See :meth:`querator.AsyncQuerator.resume_queue`."""
        body = {"queue_name": check_name("name", name)}
        return (await self._post("/v1/queues.resume", body, wa.QueueInfo)).library()

    async def list_queues(self, pivot: str | None = None, limit: int = 100) -> list[QueueInfo]:
        """See :meth:`querator.AsyncQuerator.list_queues`."""
        if pivot is not None:
            check_name("pivot", pivot)
        body = {"pivot": pivot or "", "limit": check_count("limit", limit, 1, 1_000)}
        return [
            i.library() for i in (await self._post("/v1/queues.list", body, wa.ListReply)).items
        ]

    # -- items --------------------------------------------------------------
    async def produce(self, queue: str, items: Sequence[Item]) -> list[str]:
        """See :meth:`querator.AsyncQuerator.produce`."""
        check_sequence("items", items, "querator.Item")
        with messaging.sending("produce", {queue: len(items)}) as send:
            body = {
                "queue_name": check_name("queue", queue),
                "request_timeout": format_duration(self._timeout),
                "items": wire_items("items", items, send.carrier(queue)),
            }
            ids = (await self._post("/v1/queue.produce", body, wq.ProduceReply)).ids
            send.produced({queue: ids})
        return ids

    async def lease(
        self,
        queue: str,
        *,
        client_id: str,
        batch_size: int = 1,
        timeout: float = 0.0,
        kinds: Iterable[str] | None = None,
        complete: Sequence[RefLike] = (),
    ) -> list[Leased]:
        """See :meth:`querator.AsyncQuerator.lease`. Waits longer than the
        server's 15-minute cap are made of several long polls; ``complete``
        goes with the first (one request)."""
        check_name("queue", queue)
        check_name("client_id", client_id)
        check_count("batch_size", batch_size, 1, MAX_BATCH)
        check_duration("timeout", timeout, allow_zero=True)
        wanted = check_kinds(kinds)
        done = self._batch(queue, complete) if complete else []
        deadline = anyio.current_time() + timeout
        while True:
            started = messaging.now_ns()
            wait = min(max(deadline - anyio.current_time(), SHORTEST_POLL), LONG_POLL_MAX)
            body: dict[str, Any] = {
                "queue_name": queue,
                "client_id": client_id,
                "batch_size": batch_size,
                "request_timeout": format_duration(wait),
            }
            if wanted is not None:
                body["kinds"] = list(wanted)
            sent, done = done, []  # the first poll completes them, even if it times out
            if sent:
                body["complete"] = sent
            try:
                reply = await self._post("/v1/queue.lease", body, wq.LeaseReply, wait)
            except RequestTimeout:
                if anyio.current_time() + LONG_POLL_MIN >= deadline:
                    raise
                continue
            leased = [leased_of(item) for item in reply.items]
            messaging.received(queue, client_id, leased, started)
            return leased

    async def complete(self, queue: str, items: Sequence[RefLike]) -> None:
        """See :meth:`querator.AsyncQuerator.complete`."""
        name = check_name("queue", queue)
        batch = self._batch(queue, items)
        body = {
            "queue_name": name,
            "request_timeout": format_duration(self._timeout),
            "items": batch,
        }
        with messaging.settling({"complete": [(queue, str(ref["id"])) for ref in batch]}):
            await self._post("/v1/queue.complete", body, wq.Reply)

    def _batch(self, queue: str, items: Sequence[RefLike]) -> list[dict[str, Any]]:
        check_batch("items", len(check_sequence("items", items, "Leased items")))
        return refs(queue, items, "items")

    async def retry(
        self,
        queue: str,
        items: Sequence[RefLike],
        *,
        retry_at: datetime | None = None,
        dead: bool = False,
        reason: str | None = None,
    ) -> None:
        """See :meth:`querator.AsyncQuerator.retry`."""
        check_name("queue", queue)
        check_instant("retry_at", retry_at)
        extra = {"retry_at": retry_at.isoformat() if retry_at else None, "dead": bool(dead)}
        why = check_reason(reason)
        if why is not None:
            extra["reason"] = why
        wire = [{**ref, **extra} for ref in self._batch(queue, items)]
        with messaging.settling({"retry": [(queue, ref["id"]) for ref in wire]}):
            await self._post("/v1/queue.retry", {"queue_name": queue, "items": wire}, wq.Reply)

    async def renew(
        self, queue: str, items: Sequence[RefLike], *, extend: float | None = None
    ) -> list[Leased]:
        """See :meth:`querator.AsyncQuerator.renew`."""
        check_name("queue", queue)
        body: dict[str, Any] = {"queue_name": queue, "items": self._batch(queue, items)}
        if extend is not None:
            body["extend"] = format_duration(check_duration("extend", extend))
        reply = await self._post("/v1/queue.renew", body, wq.RenewReply)
        return [leased_of(item) for item in reply.items]

    async def transact(self, **options: Unpack[TransactOptions]) -> TransactResult:
        """See :meth:`querator.AsyncQuerator.transact`."""
        check_options("transact", options, TransactOptions)
        return await self.commit(**options)

    async def commit(
        self,
        *,
        complete: Sequence[Leased | Ref] = (),
        retry: Sequence[Leased | Ref] = (),
        renew: Sequence[Leased | Ref] = (),
        depends: Sequence[Leased | Ref] = (),
        delete: Sequence[Leased | Ref] = (),
        produce: Mapping[str, Sequence[Item]] | None = None,
        retry_at: datetime | None = None,
        extend: float | None = None,
        produce_leased: Mapping[str, Sequence[Item]] | None = None,
        client_id: str | None = None,
        lookup: Mapping[str, Sequence[str]] | None = None,
        silent: Collection[str] = (),
    ) -> TransactResult:
        """See :meth:`querator.queue.service.AsyncQueueClient.commit`."""
        if isinstance(silent, str):
            raise InvalidArgument("silent", "must be a list of queue names, not one string")
        check_instant("retry_at", retry_at)
        batches = {q: len(i) for q, i in (produce or {}).items() if i}
        for q, i in (produce_leased or {}).items():
            batches[q] = batches.get(q, 0) + len(i)
        with messaging.sending("transact", batches) as send:
            body: dict[str, Any] = {
                "complete": refs(None, complete, "complete"),
                "retry": refs(None, retry, "retry"),
                "renew": refs(None, renew, "renew"),
                "depends": refs(None, depends, "depends"),
                "delete": refs(None, delete, "delete"),
                "produce": {
                    q: wire_items(f"produce[{q!r}]", i, send.carrier(q))
                    for q, i in (produce or {}).items()
                },
                "produce_leased": {
                    q: wire_items(f"produce_leased[{q!r}]", i, send.carrier(q))
                    for q, i in (produce_leased or {}).items()
                },
                "retry_at": retry_at.isoformat() if retry_at else None,
                "client_id": client_id,
                "lookup": {q: key_list(keys) for q, keys in (lookup or {}).items()},
                "silent": list(silent),
            }
            if extend is not None:
                body["extend"] = format_duration(check_duration("extend", extend))
            settled = {
                role: [(ref["queue_name"], ref["id"]) for ref in body[role]]
                for role in ("complete", "retry")
                if body[role]
            }
            with messaging.settling(settled):
                reply = await self._post("/v1/queue.transact", body, wq.TransactReply)
            send.produced(reply.produced)
        return TransactResult(
            produced=reply.produced,
            renewed=[leased_of(item) for item in reply.renewed],
            leased={
                q: [leased_of(item) if item else None for item in got]
                for q, got in reply.leased.items()
            },
            found={
                q: {key: stored_of(item) for key, item in by_key.items()}
                for q, by_key in reply.found.items()
            },
        )

    # -- inspection ---------------------------------------------------------
    async def gauges(self, queue: str, *, limit: int = 10_000) -> QueueGauges:
        """See :meth:`querator.AsyncQuerator.gauges`."""
        body = {
            "queue_name": check_name("queue", queue),
            "limit": check_count("limit", limit, 1, 1_000_000),
        }
        return (await self._post("/v1/queue.gauges", body, wq.GaugesReply)).to_gauges()

    async def publish_gauges(self) -> None:
        """Not over HTTP: the server reads its store's gauges for its own metrics
        (``GET /metrics``); a client of it keeps none. Raises UsageError."""
        raise UsageError("publish_gauges: the server publishes the gauges, at GET /metrics")

    async def stats(self, queue: str) -> QueueStats:
        """See :meth:`querator.AsyncQuerator.stats`."""
        body = {"queue_name": check_name("queue", queue)}
        return (await self._post("/v1/queue.stats", body, wq.StatsReply)).to_stats()

    async def list_items(
        self, queue: str, *, partition: int = 0, pivot: str | None = None, limit: int = 100
    ) -> list[StoredItem]:
        """See :meth:`querator.AsyncQuerator.list_items`."""
        return await self._list("/v1/storage/items.list", queue, partition, pivot, limit)

    async def list_scheduled(
        self, queue: str, *, partition: int = 0, pivot: str | None = None, limit: int = 100
    ) -> list[StoredItem]:
        """See :meth:`querator.AsyncQuerator.list_scheduled`."""
        return await self._list("/v1/storage/scheduled.list", queue, partition, pivot, limit)

    async def _list(
        self, path: str, queue: str, partition: int, pivot: str | None, limit: int
    ) -> list[StoredItem]:
        check_name("queue", queue)
        check_count("partition", partition, 0, 1_024)
        check_count("limit", limit, 1, MAX_BATCH)
        if pivot is not None and (not isinstance(pivot, str) or not pivot):
            raise InvalidArgument("pivot", f"{pivot!r} is not an item id of queue {queue!r}")
        body = {"queue_name": queue, "partition": partition, "pivot": pivot or "", "limit": limit}
        return [stored_of(item) for item in (await self._post(path, body, wa.ItemsListReply)).items]

    async def lookup(self, queue: str, dedup_keys: Sequence[str]) -> dict[str, StoredItem]:
        """See :meth:`querator.AsyncQuerator.lookup`."""
        body = {"queue_name": check_name("queue", queue), "dedup_keys": key_list(dedup_keys)}
        reply = await self._post("/v1/queue.lookup", body, wq.LookupReply)
        return {key: stored_of(item) for key, item in reply.items.items()}

    async def scan_keys(
        self, queue: str, prefix: str, *, after: str | None = None, limit: int = 100
    ) -> list[StoredItem]:
        """See :meth:`querator.AsyncQuerator.scan_keys`."""
        key_range(prefix, after)  # the same bad-input errors, before anything is sent
        check_count("limit", limit, 1, MAX_BATCH)
        body: dict[str, Any] = {"queue_name": check_name("queue", queue), "prefix": prefix}
        body.update(after=after, limit=limit)
        reply = await self._post("/v1/queue.scan_keys", body, wq.ScanKeysReply)
        return [stored_of(item) for item in reply.items]

    async def delete_items(self, queue: str, ids: Sequence[str]) -> None:
        """See :meth:`querator.AsyncQuerator.delete_items`."""
        check_name("queue", queue)
        check_batch("ids", len(check_sequence("ids", ids, "item ids")))
        body = {"queue_name": queue, "ids": list(ids)}
        await self._post("/v1/storage/items.delete", body, wq.Reply)

    async def clear(self, queue: str, *, destructive: bool = False) -> int:
        """See :meth:`querator.AsyncQuerator.clear`."""
        body = {"queue_name": check_name("queue", queue), "queue": True, "destructive": destructive}
        return (await self._post("/v1/queue.clear", body, wq.ClearReply)).deleted

    async def run_maintenance(self) -> int:
        """See :meth:`querator.AsyncQuerator.run_maintenance`."""
        return (await self._post("/v1/queues.maintain", {}, wa.MaintenanceReply)).moved
