"""The reference: a plain psycopg 3 ``FOR UPDATE SKIP LOCKED`` lease loop.

What a careful engineer writes by hand in an afternoon: one table, one index
on the ordering key, a statement-level trigger that NOTIFYs on insert, a lease
that is one autocommit ``UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP
LOCKED) RETURNING``, and a complete that is one ``DELETE … = ANY``. Leases
expire by ``available_at`` like querator's (no version checks, no attempts
limit, no partitions, no dead letters).
"""

from __future__ import annotations

import time
from typing import Any

import psycopg

from benchmarks.systems.base import Agent, Deadline, Received, Span, age_of, stamp

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    available_at timestamptz NOT NULL DEFAULT now(),
    attempts integer NOT NULL DEFAULT 0,
    payload bytea NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_available ON jobs (available_at, id);
CREATE OR REPLACE FUNCTION jobs_notify() RETURNS trigger LANGUAGE plpgsql AS
$$ BEGIN PERFORM pg_notify('jobs', ''); RETURN NULL; END $$;
CREATE OR REPLACE TRIGGER jobs_inserted AFTER INSERT ON jobs
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_notify();
"""

INSERT = "INSERT INTO jobs (payload) SELECT * FROM unnest(%s::bytea[])"
LEASE = """
UPDATE jobs SET available_at = now() + interval '30 seconds', attempts = attempts + 1
WHERE id IN (
    SELECT id FROM jobs WHERE available_at <= now()
    ORDER BY available_at, id LIMIT %s FOR UPDATE SKIP LOCKED
)
RETURNING id, payload
"""
COMPLETE = "DELETE FROM jobs WHERE id = ANY(%s)"
WAIT_CAP = 30.0
"""Longest wait for a NOTIFY before looking again."""


class PlainAgent(Agent):
    """One connection, autocommit, LISTENing when it consumes."""

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn)
        self.conn: psycopg.Connection[Any] = psycopg.connect(dsn, autocommit=True)
        self._listening = False

    def install(self) -> None:
        self.conn.execute(SCHEMA)

    def reset(self, queue: str, partitions: int = 1) -> None:
        self.conn.execute("TRUNCATE jobs")

    def produce(
        self, queue: str, count: int, batch: int, rate: float = 0.0, seconds: float = 0.0
    ) -> Span:
        start = time.monotonic()
        deadline = Deadline(seconds) if seconds else None
        done = 0
        while done < count and not (deadline and deadline.passed()):
            size = min(batch, count - done)
            self.conn.execute(INSERT, ([stamp() for _ in range(size)],))
            done += size
            if rate:
                time.sleep(max(0.0, start + done / rate - time.monotonic()))
        return Span(start, time.monotonic(), done)

    def _lease(self, batch: int) -> list[tuple[int, bytes]]:
        return self.conn.execute(LEASE, (batch,)).fetchall()

    def drain(self, queue: str, batch: int) -> Span:
        start = time.monotonic()
        done = 0
        while rows := self._lease(batch):
            self.conn.execute(COMPLETE, ([r[0] for r in rows],))
            done += len(rows)
        return Span(start, time.monotonic(), done)

    def _wait(self, seconds: float) -> None:
        if not self._listening:
            self.conn.execute("LISTEN jobs")
            self._listening = True
        for _ in self.conn.notifies(timeout=seconds, stop_after=1):
            pass

    def consume(self, queue: str, batch: int, seconds: float) -> Received:
        result = Received(time.monotonic(), 0.0)
        deadline = Deadline(seconds)
        while not deadline.passed():
            rows = self._lease(batch)
            if not rows:
                self._wait(min(WAIT_CAP, deadline.remaining()))
                continue
            now = time.monotonic()
            result.samples += [(now, age_of(r[1])) for r in rows]
            self.conn.execute(COMPLETE, ([r[0] for r in rows],))
        result.count = len(result.samples)
        result.end = time.monotonic()
        return result

    def idle(self, queue: str, seconds: float) -> Span:
        start = time.monotonic()
        deadline = Deadline(seconds)
        while not deadline.passed():
            if self._lease(1):
                raise RuntimeError("idle queue was not empty")
            self._wait(min(WAIT_CAP, deadline.remaining()))
        return Span(start, time.monotonic())

    def lease_latency(self, queue: str, samples: int, seconds: float) -> list[float]:
        timings: list[float] = []
        deadline = Deadline(seconds)
        while len(timings) < samples and not deadline.passed():
            began = time.perf_counter()
            rows = self._lease(1)
            timings.append(time.perf_counter() - began)
            self.conn.execute(COMPLETE, ([r[0] for r in rows],))
        return timings

    def close(self) -> None:
        self.conn.close()


def make_agent(dsn: str) -> Agent:
    """The entry point :class:`benchmarks.systems.System` calls."""
    return PlainAgent(dsn)
