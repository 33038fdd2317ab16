"""The PostgreSQL backend: psycopg 3, one table per partition, LISTEN/NOTIFY wakeups."""

from querator.queue.backends.postgres.backend import PostgresBackend

__all__ = ["PostgresBackend"]
