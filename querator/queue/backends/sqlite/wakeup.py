"""Cross-process wakeups for one SQLite file, over UNIX datagram sockets.

Every listening backend binds a socket file ``<pid>-<random>.sock`` in a
directory beside the database (``<db>.wake/``, or, when that would be too long
for a socket address, ``/tmp/querator-<hash of the database path>`` — a fixed
place, so processes with different ``TMPDIR`` agree; the temp dir only where
``/tmp`` is not usable). When no short enough directory exists, wakeups are off
and waiters fall back to their wait cap. After a commit that may have made items leasable, a
notifier sends each queue's name as one datagram to every socket in the
directory, never blocking; sockets whose listener is gone are removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import socket
import tempfile
import threading
from collections.abc import Callable, Iterable

import anyio

from querator.queue.backends.base import WakeCallback

__all__ = ["Wakeup", "wake_directory"]

SUPPORTED = os.name == "posix" and hasattr(socket, "AF_UNIX")
"""True where UNIX datagram sockets exist."""

_MAX_PATH = 100
"""Longest socket path used (the limit is 108 bytes on Linux, 104 on macOS)."""
_NAME_ROOM = 40
"""Room kept for a socket's file name: ``<pid>-<16 hex>.sock``."""
_SUFFIX = ".sock"
_MAX_DATAGRAM = 4096


def _fits(directory: str) -> bool:
    return len(os.fsencode(directory)) + 1 + _NAME_ROOM <= _MAX_PATH


def wake_directory(db_path: str) -> str | None:
    """The directory holding the sockets of every listener on ``db_path`` (None:
    no directory short enough for socket addresses).

    Every process on the machine computes the same directory for the same file.
    """
    real = os.path.realpath(db_path)
    beside = real + ".wake"
    if _fits(beside):
        return beside
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:16]
    for root in ("/tmp", tempfile.gettempdir()):
        candidate = os.path.join(root, f"querator-{digest}")
        if os.path.isdir(root) and os.access(root, os.W_OK) and _fits(candidate):
            return candidate
    return None


class Wakeup:
    """Sends and receives wakeups among the processes that use one database file."""

    def __init__(self, db_path: str) -> None:
        directory = wake_directory(db_path) if SUPPORTED else None
        self.supported = directory is not None
        self.directory = directory or ""
        self._sender: socket.socket | None = None
        self._lock = threading.Lock()
        self._own: set[str] = set()

    def _send_socket(self) -> socket.socket:
        with self._lock:
            if self._sender is None:
                sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                sender.setblocking(False)
                self._sender = sender
            return self._sender

    def _peers(self) -> list[str]:
        try:
            entries = os.scandir(self.directory)
        except OSError:
            return []
        with entries:
            return [
                entry.path
                for entry in entries
                if entry.name.endswith(_SUFFIX) and entry.path not in self._own
            ]

    def notify(self, names: Iterable[str]) -> None:
        """Send each queue name to every listener in other backends; never blocks."""
        if not self.supported:
            return
        peers = self._peers()
        if not peers:
            return
        sender = self._send_socket()
        messages = [name.encode() for name in sorted(set(names))]
        for peer in peers:
            for message in messages:
                try:
                    sender.sendto(message, peer)
                except (ConnectionRefusedError, FileNotFoundError):
                    with contextlib.suppress(OSError):
                        os.unlink(peer)  # its listener is gone
                    break
                except OSError:
                    break  # full buffer (it has wakeups pending) or no permission

    def _bind(self) -> tuple[socket.socket, str]:
        path = os.path.join(self.directory, f"{os.getpid()}-{secrets.token_hex(8)}{_SUFFIX}")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.setblocking(False)
            for attempt in range(3):
                os.makedirs(self.directory, exist_ok=True)
                try:
                    sock.bind(path)
                    break
                except FileNotFoundError:  # the last listener removed the directory
                    if attempt == 2:
                        raise
        except BaseException:
            sock.close()
            raise
        return sock, path

    async def listen(self, on_wake: WakeCallback, on_ready: Callable[[], None]) -> None:
        """Call ``on_wake(name)`` for each wakeup received, until cancelled;
        ``on_ready()`` once the socket is bound (senders see it from then on)."""
        if not self.supported:
            return
        sock, path = self._bind()
        self._own.add(path)
        on_ready()
        try:
            while True:
                await anyio.wait_readable(sock)
                for name in _drain(sock):
                    on_wake(name)
        finally:
            self._own.discard(path)
            sock.close()
            with contextlib.suppress(OSError):
                os.unlink(path)
            with contextlib.suppress(OSError):
                os.rmdir(self.directory)  # only succeeds when no listener is left

    def close(self) -> None:
        """Close the sending socket."""
        with self._lock:
            if self._sender is not None:
                self._sender.close()
                self._sender = None


def _drain(sock: socket.socket) -> list[str]:
    """Every datagram waiting on ``sock``, decoded."""
    names: list[str] = []
    while True:
        try:
            data = sock.recv(_MAX_DATAGRAM)
        except (BlockingIOError, InterruptedError):
            return names
        names.append(data.decode("utf-8", errors="replace"))
