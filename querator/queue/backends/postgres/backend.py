"""PostgresBackend: the Backend protocol on PostgreSQL with psycopg 3."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg import errors as pg_errors
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool
from psycopg_pool.base import AttemptWithBackoff

from querator.clock import SYSTEM, Clock
from querator.errors import (
    Conflict,
    ConflictReason,
    InvalidArgument,
    QueueExists,
    QueueNotEmpty,
    QueueNotFound,
    Unavailable,
)
from querator.queue.backends.base import (
    Kinds,
    Leases,
    NewItem,
    ProduceSteps,
    TableRefs,
    TxnPlan,
    WakeCallback,
    settings_wake,
    wake_only,
)
from querator.queue.backends.postgres import rows
from querator.queue.backends.postgres import statements as stmt
from querator.queue.backends.postgres.array_params import int_array, text_array
from querator.queue.backends.postgres.deadline import MARGIN, Blocked, Cutoffs
from querator.queue.backends.postgres.dsn import split_dsn
from querator.queue.backends.postgres.failures import driver_errors, refuse_bad_dsn
from querator.queue.backends.postgres.foreign import produce_steps
from querator.queue.backends.postgres.fused import fusable
from querator.queue.backends.postgres.group_commit import GroupCommit
from querator.queue.backends.postgres.items import (
    Conn,
    dead_letter,
    insert_items,
    insert_unkeyed,
    notify,
)
from querator.queue.backends.postgres.listener import listen_forever
from querator.queue.backends.postgres.migrations import prepare_schema
from querator.queue.backends.postgres.pooled import CallParts, PooledCall
from querator.queue.backends.postgres.renew_at_once import one_table_renew, renew_at_once
from querator.queue.backends.postgres.replication import Timeline
from querator.queue.backends.postgres.retry_at_once import one_table_retry, retry_at_once
from querator.queue.backends.postgres.schema import (
    DROP_TABLES,
    partitions_ddl,
    run_each,
)
from querator.queue.backends.postgres.sessions import (
    Sessions,
    configurer,
)
from querator.queue.backends.postgres.sync_calls import SyncCalls
from querator.queue.backends.postgres.transact import (
    ChecksFailed,
    complete_at_once,
    complete_table,
    completes_only,
    in_seq_order,
    one_table_complete,
    run_self_checked,
    run_transact,
)
from querator.queue.backends.schema_versions import SchemaReport
from querator.queue.dead_reasons import EXPIRED, exhausted
from querator.queue.models import (
    Leased,
    PartitionGauges,
    PartitionStats,
    QueueInfo,
    QueueSettings,
    StoredItem,
    TransactResult,
)
from querator.queue.outage import BACKOFF_CAP


class _CappedAttempt(AttemptWithBackoff):
    """psycopg_pool's reconnection backoff, its delay capped at BACKOFF_CAP: the
    pool doubles it without a useful bound, so after a long outage it would
    reconnect long after the database is back."""

    def update_delay(self, now: float) -> None:
        super().update_delay(now)
        self.delay = min(self.delay, BACKOFF_CAP)


class Pool(AsyncConnectionPool[AsyncConnection[TupleRow]]):
    """The connection pool, reconnecting with a capped backoff."""

    async def _add_connection(
        self, attempt: AttemptWithBackoff | None, growing: bool = False
    ) -> None:
        # psycopg_pool makes a fresh attempt per reconnection and hands it on
        # through its retries: the capped one is used throughout (pinned < 4).
        if attempt is None:
            attempt = _CappedAttempt(timeout=self.reconnect_timeout)
        await super()._add_connection(attempt, growing)


OPEN_TIMEOUT = 10.0
"""Seconds ``open()`` waits for a first connection before raising Unavailable."""


class PostgresBackend:
    """Queues and items in one PostgreSQL schema; every time is the database's ``now()``
    unless ``clock`` gives another instant (a test's :class:`~querator.clock.ManualClock`).

    ``dsn`` may be a URL with a ``schema`` query parameter, which overrides the
    ``schema`` keyword, and ``pool_min``, ``pool_max`` (connections, default 1
    and 10; ``min_size``/``max_size`` override them) and ``pool_timeout``
    (seconds a call waits for a free connection, default 30).
    """

    supports_notify: bool = True

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "querator",
        min_size: int | None = None,
        max_size: int | None = None,
        clock: Clock = SYSTEM,
    ) -> None:
        target = split_dsn(dsn, schema)
        self._conninfo = target.conninfo
        self._names = stmt.Names(target.schema)
        self._min_size = min_size if min_size is not None else target.pool_min
        self._max_size = max_size if max_size is not None else target.pool_max
        self._pool_timeout = target.pool_timeout
        self._deadline = target.statement_deadline
        self._pool: Pool | None = None
        self._citus = False
        """Whether the store is on a Citus coordinator (read when opened): a
        statement routed whole to a worker node notifies no listener there."""
        self._clock = clock
        self._prioritized: set[tuple[int, int]] = set()
        """(queue id, partition) of the partitions found holding items of a
        priority other than 0: leased with :data:`~.statements.LEASE_BY_PRIORITY`
        until none is left."""
        self._group = GroupCommit(self._connect, self._names, clock)
        """Runs one-statement transactions, those of concurrent callers together."""
        self._blocked = Blocked(self._store_name, self._deadline)
        """Logs the episodes of calls that pass the statement deadline."""
        self._sessions = Sessions()
        """Which pooled sessions may be handed out after a session-state error."""
        self._timeline = Timeline(self._store_name)
        """Notices a failover to a promoted standby (see :mod:`.replication`)."""
        self._parts = CallParts(
            self._sessions, Cutoffs(self._deadline + MARGIN), self._blocked, self._timeline
        )
        """What every pooled call shares (:mod:`.pooled`)."""
        self._sync: SyncCalls | None = None

    def sync_calls(self) -> SyncCalls | None:
        """The hot calls for sync callers on their own thread (:mod:`.sync_calls`),
        or None while the backend is not open."""
        if self._pool is None:
            return None
        sync = self._sync
        if sync is None:
            sync = self._sync = SyncCalls(
                self._conninfo,
                self._names,
                self._deadline,
                self,
                self._sessions,
                self._blocked,
                self._citus,
            )
        return sync

    @property
    def schema(self) -> str:
        """The schema holding this backend's tables."""
        return self._names.schema

    @property
    def _store_name(self) -> str:
        return f"PostgreSQL store in schema {self._names.schema!r}"

    async def open(self) -> None:
        """Open the pool and create the schema, or migrate it to the newest version.

        A store migrated by a newer querator beyond what this one can use raises
        SchemaTooNew (:mod:`.migrations`). A server that refuses the connection
        string for good (a missing database or role, a wrong password) raises
        InvalidArgument at once, naming the cause; an unreachable one raises
        Unavailable at once.
        """
        if self._pool is not None:
            return
        await refuse_bad_dsn(self._conninfo, OPEN_TIMEOUT)
        pool = Pool(
            self._conninfo,
            min_size=self._min_size,
            max_size=self._max_size,
            open=False,
            kwargs={"autocommit": True},
            configure=configurer(self._deadline, self._sessions, self._timeline),
            name=f"querator-{self._names.schema}",
            timeout=self._pool_timeout,
        )
        try:
            with driver_errors():
                await pool.open(wait=True, timeout=OPEN_TIMEOUT)
                async with pool.connection() as conn, conn.transaction():
                    await prepare_schema(conn, self._names, self._store_name, apply=True)
                    cur = await conn.execute(stmt.CITUS_VERSION)
                    row = await cur.fetchone()
                    self._citus = row is not None and row[0] is not None
        except BaseException:
            await pool.close()
            raise
        self._pool = pool

    async def migrate(self, apply: bool) -> SchemaReport:
        """Create or migrate the schema (or, unless ``apply``, say what that would
        do) on a connection of its own, without opening the backend."""
        await refuse_bad_dsn(self._conninfo, OPEN_TIMEOUT)
        with driver_errors():
            conn = await AsyncConnection.connect(self._conninfo, connect_timeout=int(OPEN_TIMEOUT))
            async with conn, conn.transaction():
                return await prepare_schema(conn, self._names, self._store_name, apply)

    async def close(self) -> None:
        """Close the pool; the data stays."""
        pool, self._pool = self._pool, None
        sync, self._sync = self._sync, None
        if sync is not None:
            sync.close()
        if pool is not None:
            try:
                await self._parts.kept.give_back(pool)
            finally:
                await pool.close()

    async def listen(self, on_wake: WakeCallback, on_ready: Callable[[], None]) -> None:
        """Deliver NOTIFY wakeups from a dedicated connection until cancelled."""
        await listen_forever(self._conninfo, self._names, on_wake, on_ready)

    # -- plumbing -------------------------------------------------------------

    def _fill(self, template: sql.SQL, **fields: sql.Composable) -> sql.Composed:
        """Fill a template's schema-level identifiers (and ``fields``)."""
        return template.format(
            schema=self._names.schema_id,
            queues=self._names.queues,
            maintenance=self._names.maintenance,
            columns=stmt.QUEUE_COLUMNS,
            **fields,
        )

    def _connect(self, queue: str | None = None) -> PooledCall:
        """A pooled autocommit connection under the statement deadline; driver
        errors become querator errors (:class:`.pooled.PooledCall`)."""
        pool = self._pool
        if pool is None:
            raise Unavailable("the PostgreSQL backend is not open")
        return PooledCall(self._parts, pool, queue)

    @asynccontextmanager
    async def _transaction(self, queue: str | None = None) -> AsyncIterator[Conn]:
        """A pooled connection inside a transaction, committed when the block succeeds."""
        async with self._connect(queue) as conn, conn.transaction():
            yield conn

    async def _create_partitions(self, conn: Conn, queue_id: int, numbers: range) -> None:
        if numbers:
            await run_each(conn, partitions_ddl(self._names, ((queue_id, n) for n in numbers)))

    def _table(self, queue: QueueInfo, partition: int) -> sql.Identifier:
        return self._names.partition(queue.queue_id, partition)

    def _union(self, template: sql.SQL, queue: QueueInfo) -> sql.Composed:
        """One branch of ``template`` per partition, joined by UNION ALL."""
        return sql.SQL(" UNION ALL ").join(
            template.format(table=self._table(queue, n)) for n in range(queue.settings.partitions)
        )

    # -- queues ---------------------------------------------------------------

    async def complete_table(self, refs: TableRefs) -> bool:
        """:meth:`transact`'s path 1 for items named by their table
        (:func:`.transact.complete_table`, the sync shell's statement)."""
        now = self._clock.store_now()
        async with self._connect(refs.queue) as conn:
            return await complete_table(conn, self._names, refs, now)

    async def create_queue(self, name: str, settings: QueueSettings) -> QueueInfo:
        """Create the queue and its partition tables; QueueExists if taken."""
        async with self._transaction() as conn:
            try:
                cur = await conn.execute(
                    self._fill(stmt.INSERT_QUEUE), rows.settings_params(name, settings)
                )
            except pg_errors.UniqueViolation as exc:
                raise QueueExists(name) from exc
            info = rows.queue_info(_one(await cur.fetchone()))
            await self._create_partitions(conn, info.queue_id, range(settings.partitions))
        return info

    async def update_queue(self, name: str, settings: QueueSettings) -> QueueInfo:
        """Store new settings, creating added partitions, and notify every client of
        the schema at commit; QueueNotFound if absent."""
        async with self._transaction() as conn:
            cur = await conn.execute(self._fill(stmt.LOCK_QUEUE), {"name": name})
            row = await cur.fetchone()
            if row is None:
                raise QueueNotFound(name)
            old = rows.queue_info(row).settings.partitions
            if settings.partitions < old:
                rule = f"may only grow: the queue has {old}, got {settings.partitions}"
                raise InvalidArgument("partitions", rule)
            cur = await conn.execute(
                self._fill(stmt.UPDATE_QUEUE), rows.settings_params(name, settings)
            )
            info = rows.queue_info(_one(await cur.fetchone()))
            await self._create_partitions(conn, info.queue_id, range(old, settings.partitions))
            await notify(conn, self._names, [settings_wake(name)])
        return info

    async def pause_queue(self, name: str, paused: bool) -> QueueInfo:
        """Mark the queue paused (or not) and notify every client of the schema
        (:func:`~querator.queue.backends.base.settings_wake`) at commit."""
        async with self._transaction() as conn:
            cur = await conn.execute(self._fill(stmt.PAUSE_QUEUE), {"name": name, "paused": paused})
            row = await cur.fetchone()
            if row is None:
                raise QueueNotFound(name)
            await notify(conn, self._names, [settings_wake(name)])
        return rows.queue_info(row)

    async def delete_queue(self, name: str, force: bool) -> None:
        """Drop the queue and its tables; QueueNotFound if absent, QueueNotEmpty if
        it holds items and not ``force`` (counted with its tables locked against
        writers, so no item produced meanwhile is dropped unseen); every client of
        the schema is notified at commit."""
        async with self._transaction() as conn:
            cur = await conn.execute(self._fill(stmt.DELETE_QUEUE), {"name": name})
            row = await cur.fetchone()
            if row is None:
                raise QueueNotFound(name)
            queue_id, partitions = row
            tables = [self._names.partition(queue_id, n) for n in range(partitions)]
            joined = sql.SQL(", ").join(tables)
            if not force:
                await conn.execute(stmt.LOCK_TABLES.format(tables=joined))
                count = sql.SQL(" + ").join(stmt.COUNT_ITEMS.format(table=t) for t in tables)
                cur = await conn.execute(sql.SQL("SELECT ") + count)
                found = _one(await cur.fetchone())[0]
                if found:
                    raise QueueNotEmpty(name, found)
            await conn.execute(DROP_TABLES.format(tables=joined))
            await notify(conn, self._names, [settings_wake(name)])

    async def get_queue(self, name: str) -> QueueInfo:
        """The queue's info; QueueNotFound if absent."""
        async with self._connect() as conn:
            cur = await conn.execute(self._fill(stmt.SELECT_QUEUE), {"name": name})
            row = await cur.fetchone()
        if row is None:
            raise QueueNotFound(name)
        return rows.queue_info(row)

    async def list_queues(self, pivot: str | None, limit: int) -> list[QueueInfo]:
        """Queues with name >= pivot, by name, at most ``limit``."""
        async with self._connect() as conn:
            cur = await conn.execute(
                self._fill(stmt.LIST_QUEUES), {"pivot": pivot or "", "limit": limit}
            )
            return [rows.queue_info(row) for row in await cur.fetchall()]

    async def queues_with_dead_queue(self, dead_queue: str) -> list[str]:
        """Names of queues whose settings name ``dead_queue``."""
        async with self._connect() as conn:
            cur = await conn.execute(
                self._fill(stmt.QUEUES_WITH_DEAD_QUEUE), {"dead_queue": dead_queue}
            )
            return [name for (name,) in await cur.fetchall()]

    # -- items ----------------------------------------------------------------

    async def produce(self, queue: QueueInfo, items: Sequence[NewItem]) -> list[str]:
        """Insert items; returns ids in order. A dedup_key already held returns that id."""
        if items and all(new.dedup_key is None for new in items):
            async with self._connect(queue.name) as conn:
                return await insert_unkeyed(
                    conn, self._names, queue, items, self._clock.store_now()
                )
        async with self._transaction(queue.name) as conn:
            return await insert_items(conn, self._names, queue, items, now=self._clock.store_now())

    def produce_steps(self, queue: QueueInfo, items: Sequence[NewItem]) -> ProduceSteps:
        """The statements that insert items on the application's own connection
        (see :mod:`querator.queue.backends.postgres.foreign`)."""
        return produce_steps(self._names, queue, items, self._clock.store_now())

    async def lease(
        self, queue: QueueInfo, partition: int, client_id: str, limit: int, kinds: Kinds = None
    ) -> Leases:
        """Lease up to ``limit`` leasable items of one partition (of ``kinds``), in order:
        higher priorities first, then ``(available_at, seq)``.

        A partition whose items all have priority 0 is leased by :data:`~.statements.LEASE`,
        which leases nothing while some item has another priority; an empty lease
        then checks for one (:meth:`probe_call`), and such a partition is leased by
        priority until its last item of another priority is gone. The sync shell
        (:mod:`.sync_calls`) runs the same calls in the same order."""
        by_priority = self.prioritized(queue, partition)
        statement, params = self.lease_call(queue, partition, client_id, limit, kinds, by_priority)
        async with self._connect(queue.name) as conn:
            cur = await conn.execute(statement, params, binary=True)
            found = await cur.fetchall()
            if not found and not by_priority:
                cur = await conn.execute(self.probe_call(queue, partition))
                row = await cur.fetchone()
                if row is not None and row[0]:
                    by_priority = self.mark_prioritized(queue, partition)
                    statement, params = self.lease_call(
                        queue, partition, client_id, limit, kinds, by_priority
                    )
                    cur = await conn.execute(statement, params, binary=True)
                    found = await cur.fetchall()
        return self.leased_rows(queue, partition, found, client_id, by_priority)

    async def lease_completing(
        self,
        queue: QueueInfo,
        partition: int,
        client_id: str,
        limit: int,
        kinds: Kinds,
        done: TableRefs,
    ) -> Leases | None:
        """Complete the held items ``done`` (of one partition of ``queue``) and
        lease from ``partition`` in one statement (:meth:`lease_call`); None when
        a check failed (nothing changed), or on Citus or a partition leased by
        priority, where the caller completes apart."""
        if self._citus or self.prioritized(queue, partition):
            return None
        statement, params = self.lease_call(queue, partition, client_id, limit, kinds, done=done)
        async with self._connect(queue.name) as conn:
            found = await run_self_checked(
                conn, queue.name, statement, params, fetch=True, binary=True
            )
        if found is None:
            return None
        return self.leased_rows(queue, partition, found, client_id, False)

    def prioritized(self, queue: QueueInfo, partition: int) -> bool:
        """Whether ``partition`` is leased by priority now (see :meth:`lease`)."""
        return (queue.queue_id, partition) in self._prioritized

    def mark_prioritized(self, queue: QueueInfo, partition: int) -> bool:
        """``partition`` holds items of another priority: lease it by priority (True)."""
        self._prioritized.add((queue.queue_id, partition))
        return True

    def probe_call(self, queue: QueueInfo, partition: int) -> bytes:
        """The statement that finds whether ``partition`` holds an item of another priority."""
        return stmt.prioritized_for(self._names, queue.queue_id, partition)

    def lease_call(
        self,
        queue: QueueInfo,
        partition: int,
        client_id: str,
        limit: int,
        kinds: Kinds = None,
        by_priority: bool = False,
        done: TableRefs | None = None,
    ) -> tuple[bytes, dict[str, Any]]:
        """The statement and parameters of :meth:`lease` (sans I/O: the sync
        shell, :mod:`.sync_calls`, runs them too); run them with ``binary=True``
        and decode the rows with :meth:`leased_rows`. With ``done`` (held items
        of one partition of ``queue``; not ``by_priority``) the statement
        completes them first (:data:`~.statements.LEASE_COMPLETING`), and a
        failed check raises an error :func:`.transact.failed_check` recognizes."""
        params = {
            "kinds": None if kinds is None else list(kinds),
            "max_attempts": queue.settings.max_attempts,
            "limit": limit,
            "lease_timeout": float(queue.settings.lease_timeout),
            "client_id": client_id,
            "now": self._clock.store_now(),
        }
        if done is None:
            return stmt.lease_for(self._names, queue.queue_id, partition, by_priority), params
        assert not by_priority, "a priority lease completes apart"
        seqs, versions = in_seq_order(done)
        params |= {"seqs": int_array(seqs), "versions": int_array(versions), "count": len(seqs)}
        names = self._names
        return stmt.lease_completing_for(names, queue.queue_id, partition, done.partition), params

    def leased_rows(
        self, queue: QueueInfo, partition: int, found: list[Any], client_id: str, by_priority: bool
    ) -> Leases:
        """The rows of :meth:`lease_call`'s statement as leased records in lease
        order (a priority lease that found no item of another priority left
        returns the partition to the plain lease)."""
        if found and found[-1][0] is None:  # a marker: nothing leased, or no priority left
            if by_priority:
                self._prioritized.discard((queue.queue_id, partition))
            found = [row for row in found if row[0] is not None]
        return rows.leases_of(queue, partition, found, client_id, by_priority)

    async def next_available_at(self, queue: QueueInfo, kinds: Kinds = None) -> datetime | None:
        """Earliest ``available_at`` of any item (of ``kinds``) that could become
        leasable, or None."""
        statement = stmt.NEXT_AVAILABLE.format(
            branches=self._union(stmt.NEXT_AVAILABLE_BRANCH, queue)
        )
        async with self._connect(queue.name) as conn:
            params = {
                "max_attempts": queue.settings.max_attempts,
                "now": self._clock.store_now(),
                "kinds": None if kinds is None else list(kinds),
            }
            cur = await conn.execute(statement, params)
            row = await cur.fetchone()
        return None if row is None else _as_datetime(row[0])

    async def _at_once(self, plan: TxnPlan, now: datetime | None) -> list[Leased] | None:
        """Paths w, 0 and r of :meth:`transact`: the renewed items (none but for
        path r) when ``plan`` was applied by one autocommit statement (a
        wake-only plan's NOTIFY, or a one-table retry or renew that checked
        itself); None when it was not."""
        if wake_only(plan):  # nothing to lock or check
            async with self._connect() as conn:
                await notify(conn, self._names, plan.wake)
            return []
        if self._citus:
            return None
        if one_table_retry(plan):
            async with self._connect() as conn:
                return [] if await retry_at_once(conn, self._names, plan, now) else None
        if one_table_renew(plan):
            async with self._connect() as conn:
                return await renew_at_once(conn, self._names, plan, now)
        return None

    async def transact(self, plan: TxnPlan) -> TransactResult:
        """Apply the plan atomically or raise Conflict listing every failed check.

        A plan takes the first of the paths that fits it. A path whose check
        fails changes nothing and hands the plan on; the last one names every
        failed check in the :class:`~querator.errors.Conflict`.

        ====  =========================  ==========================================
        path  plans it takes             how it runs
        ====  =========================  ==========================================
        w     wakes only (no items)      one autocommit ``pg_notify`` of its names
        0     retries only, all in one   one autocommit ``UPDATE`` that checks
              table (a lock's release)   versions and leases itself and notifies
                                         (:mod:`.retry_at_once`; not on Citus,
                                         whose worker would send the NOTIFY
                                         to no listener); then a plan
                                         not durable or waking names goes
                                         straight to path 4
        r     renews only, all in one    one autocommit ``UPDATE`` that checks
              table (a worker's          versions and leases itself and
              heartbeat)                 returns the rows (:mod:`.renew_at_once`;
                                         not on Citus)
        1     completes only, all in     one autocommit ``DELETE`` that checks
              one partition: a           versions and leases itself
              ``complete(batch)``        (:func:`.transact.complete_at_once`)
        2     completes, checks          one statement of data-modifying CTEs
              (depends), produces and    (:mod:`.fused`; its ``FUSED_*`` templates
              claims only, every queue   in :mod:`.fused_sql`), run together with
              known, one insert a table  concurrent callers' (:mod:`.group_commit`)
        3     completes only, of the     a transaction of one self-checking
              plan's own queues          ``DELETE`` a table
                                         (``run_transact(..., checked=True)``)
        4     any plan                   a transaction that locks the items in
                                         order, checks everything, then applies
                                         (:func:`.transact.run_transact`)
        ====  =========================  ==========================================
        """
        now = self._clock.store_now()
        renewed = await self._at_once(plan, now)
        if renewed is not None:
            return TransactResult.model_construct(
                produced={}, renewed=renewed, leased={}, found={}, held_for={}
            )
        if not plan.durable or (plan.wake and not fusable(plan)):  # the general path sets,
            # and wakes them (the one statement of path 2 wakes them too)
            async with self._transaction() as conn:
                if not plan.durable:
                    await conn.execute(stmt.ASYNC_COMMIT)
                return await run_transact(conn, self._names, plan, now=now)
        if one_table_complete(plan) and not plan.wake:
            async with self._connect() as conn:
                done = await complete_at_once(conn, self._names, plan, now)
            if done is not None:
                return done
        elif fusable(plan):
            result = await self._group.run(plan)
            if result is not None:
                return result
        if completes_only(plan):
            try:
                async with self._transaction() as conn:
                    return await run_transact(conn, self._names, plan, now=now, checked=True)
            except ChecksFailed:
                pass  # rolled back: the locking path below names every failed check
        async with self._transaction() as conn:
            return await run_transact(conn, self._names, plan, now=now)

    async def dead_letter_due(self, queue: QueueInfo, dead: QueueInfo | None, limit: int) -> int:
        """Move up to ``limit`` exhausted or expired, unheld items; returns how many."""
        moved = 0
        async with self._transaction(queue.name) as conn:
            for partition in range(queue.settings.partitions):
                if moved >= limit:
                    break
                params = {
                    "max_attempts": queue.settings.max_attempts,
                    "exhausted": exhausted(queue.settings.max_attempts),
                    "expired": EXPIRED,
                    "limit": limit - moved,
                    "now": self._clock.store_now(),
                }
                source = (queue, partition)
                moved += await dead_letter(conn, self._names, source, dead, stmt.DUE_FOUND, params)
            if dead is not None and moved:
                await notify(conn, self._names, {dead.name})
        return moved

    async def claim_maintenance(self, interval: float) -> bool:
        """True for exactly one caller per ``interval`` seconds across all clients."""
        async with self._connect() as conn:
            params = {"interval": interval, "now": self._clock.store_now()}
            cur = await conn.execute(self._fill(stmt.CLAIM_MAINTENANCE), params)
            return await cur.fetchone() is not None

    async def stats(self, queue: QueueInfo) -> list[PartitionStats]:
        """Counts per partition."""
        partitions = list(range(queue.settings.partitions))
        async with self._transaction(queue.name) as conn:
            await conn.execute(stmt.SCANS_ALLOWED)
            branches = sql.SQL(" UNION ALL ").join(
                stmt.STATS_BRANCH.format(table=self._table(queue, n), partition=sql.Literal(n))
                for n in partitions
            )
            cur = await conn.execute(branches, {"now": self._clock.store_now()})
            found = [rows.partition_stats(row) for row in await cur.fetchall()]
        return sorted(found, key=lambda stats: stats.partition)

    async def gauges(self, queue: QueueInfo, limit: int) -> list[PartitionGauges]:
        """Bounded probes per partition (the planner's estimate past ``limit``)."""
        branches = sql.SQL(" UNION ALL ").join(
            stmt.GAUGES_BRANCH.format(
                partition=sql.Literal(n),
                table=self._table(queue, n),
                regclass=sql.Literal(self._table(queue, n).as_string(None)),
            )
            for n in range(queue.settings.partitions)
        )
        params = {
            "limit": limit,
            "max_attempts": queue.settings.max_attempts,
            "now": self._clock.store_now(),
        }
        async with self._connect(queue.name) as conn:
            cur = await conn.execute(branches, params)
            found = [rows.partition_gauges(row, limit) for row in await cur.fetchall()]
        return sorted(found, key=lambda gauges: gauges.partition)

    async def list_items(
        self,
        queue: QueueInfo,
        partition: int,
        pivot_seq: int | None,
        limit: int,
        scheduled_only: bool,
    ) -> list[StoredItem]:
        """Items of one partition with seq >= pivot_seq, by seq."""
        statement = stmt.LIST_ITEMS.format(
            table=self._table(queue, partition), columns=stmt.ITEM_COLUMNS
        )
        params = {
            "pivot": pivot_seq or 0,
            "limit": limit,
            "scheduled_only": scheduled_only,
            "now": self._clock.store_now(),
        }
        async with self._connect(queue.name) as conn:
            cur = await conn.execute(statement, params)
            found = await cur.fetchall()
        return [rows.item(StoredItem, queue, partition, row) for row in found]

    async def lookup(self, queue: QueueInfo, dedup_keys: Sequence[str]) -> list[StoredItem]:
        """The items (in any partition) holding any of ``dedup_keys``."""
        statement = stmt.lookup_for(self._names, queue.queue_id, queue.settings.partitions)
        async with self._connect(queue.name) as conn:
            cur = await conn.execute(statement, {"keys": text_array(dedup_keys)})
            found = await cur.fetchall()
        return [rows.item(StoredItem, queue, row[0], row[1:]) for row in found]

    async def scan_keys(
        self, queue: QueueInfo, low: str, include_low: bool, high: str | None, limit: int
    ) -> list[StoredItem]:
        """Items by dedup key in the range: an index range scan per partition."""
        partitions = queue.settings.partitions
        statement = stmt.scan_keys_for(
            self._names, queue.queue_id, partitions, include_low, high is not None
        )
        params = {"low": low, "high": high, "limit": limit}
        async with self._connect(queue.name) as conn:
            cur = await conn.execute(statement, params)
            found = await cur.fetchall()
        items = [rows.item(StoredItem, queue, row[0], row[1:]) for row in found]
        items.sort(key=lambda item: item.dedup_key or "")
        return items[:limit]

    async def delete_items(self, queue: QueueInfo, keys: Sequence[tuple[str, int, int]]) -> None:
        """Delete (id, partition, seq) items; Conflict (MISSING) lists absent ones."""
        missing: dict[str, ConflictReason] = {}
        wanted: dict[int, dict[int, str]] = {}
        for item_id, partition, seq in keys:
            if 0 <= partition < queue.settings.partitions:
                wanted.setdefault(partition, {})[seq] = item_id
            else:
                missing[item_id] = ConflictReason.MISSING
        async with self._transaction(queue.name) as conn:
            for partition in sorted(wanted):
                statement = stmt.DELETE_ITEMS.format(table=self._table(queue, partition))
                cur = await conn.execute(statement, {"seqs": sorted(wanted[partition])})
                gone = {seq for (seq,) in await cur.fetchall()}
                for seq, item_id in wanted[partition].items():
                    if seq not in gone:
                        missing[item_id] = ConflictReason.MISSING
            if missing:
                raise Conflict(missing)

    async def clear(self, queue: QueueInfo, destructive: bool) -> int:
        """Delete unheld items (or all when destructive); returns how many."""
        template = stmt.CLEAR_ALL if destructive else stmt.CLEAR_UNHELD
        deleted = 0
        async with self._transaction(queue.name) as conn:
            await conn.execute(stmt.SCANS_ALLOWED)
            for partition in range(queue.settings.partitions):
                statement = template.format(table=self._table(queue, partition))
                cur = await conn.execute(statement, {"now": self._clock.store_now()})
                deleted += cur.rowcount
        return deleted


def _one(row: Any) -> Any:
    """The row a RETURNING statement must have produced."""
    if row is None:
        raise Unavailable("PostgreSQL returned no row where one was expected")
    return row


def _as_datetime(value: Any) -> datetime | None:
    return value if isinstance(value, datetime) else None
