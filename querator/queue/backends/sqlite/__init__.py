"""The SQLite backend: the embedded default, for one machine and many processes."""

from querator.queue.backends.sqlite.backend import SqliteBackend

__all__ = ["SqliteBackend"]
