"""Slow and greedy clients of a real ``querator serve``, on real sockets: a
request must arrive within its deadlines (slowloris), one address holds at
most so many connections, and a slow answer (a long poll) is never cut."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest
from http_server import serve
from polling import wait_for

SLOWLORIS = 200
"""Connections of the slowloris test (what held the server's descriptors)."""


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    """A server with short deadlines and room for the slowloris connections."""
    with serve(
        "memory://",
        "--header-timeout", "1", "--body-timeout", "2",
        "--max-client-connections", str(SLOWLORIS + 20),
    ) as base:  # fmt: skip
        httpx.post(f"{base}/v1/queues.create", json={"queue_name": "q"}, timeout=10)
        yield base


def connect(url: str) -> socket.socket:
    """A raw TCP connection to the server."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=30)


def closed_by_server(sock: socket.socket, within: float) -> bytes:
    """What the server sent before closing ``sock`` (fails if it keeps it open)."""
    sock.settimeout(within)
    received = b""
    try:
        while chunk := sock.recv(4096):
            received += chunk
    except ConnectionResetError:
        pass
    except TimeoutError:
        pytest.fail(f"the server kept the connection open for {within}s")
    return received


def read_response(sock: socket.socket) -> bytes:
    """One whole response (status line, headers and ``Content-Length`` body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        assert chunk, f"closed mid-response: {data!r}"
        data += chunk
    top, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in top.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = sock.recv(4096)
        assert chunk, "closed mid-body"
        body += chunk
    return top + b"\r\n\r\n" + body


def head(path: str, length: int | None = None) -> bytes:
    """The start of a POST request: its headers, complete if ``length`` is given."""
    text = f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
    if length is not None:
        text += f"Content-Length: {length}\r\n\r\n"
    return text.encode()


def test_slowloris_connections_are_closed_and_others_served(url: str) -> None:
    sockets = [connect(url) for _ in range(SLOWLORIS)]
    try:
        for sock in sockets:
            sock.sendall(head("/v1/queues.list"))  # headers that never end
        started = time.monotonic()
        answer = httpx.post(f"{url}/v1/queues.list", json={}, timeout=10)
        assert answer.status_code == 200  # the server still serves others meanwhile
        for sock in sockets:
            got = closed_by_server(sock, within=15)
            assert got.startswith(b"HTTP/1.1 408 ")
        assert time.monotonic() - started < 15
    finally:
        for sock in sockets:
            sock.close()


def test_a_silent_connection_is_closed(url: str) -> None:
    with connect(url) as sock:
        assert closed_by_server(sock, within=15).startswith(b"HTTP/1.1 408 ")


def test_a_body_sent_too_slowly_is_cut_off(url: str) -> None:
    with connect(url) as sock:
        sock.sendall(head("/v1/queues.list", length=100) + b'{"limit": ')
        assert closed_by_server(sock, within=15) == b""  # headers were in: no answer


def test_a_slow_answer_is_not_cut(url: str) -> None:
    poll = json.dumps(
        {"queue_name": "q", "client_id": "c", "batch_size": 1, "request_timeout": "3s"}
    ).encode()
    with connect(url) as sock:
        sock.sendall(head("/v1/queue.lease", length=len(poll)) + poll)
        sock.settimeout(15)
        answer = read_response(sock)  # after 3 s, past both deadlines
        assert answer.startswith(b"HTTP/1.1 454 "), answer
        sock.sendall(head("/v1/queues.list", length=2) + b"{}")  # kept alive, reused
        assert read_response(sock).startswith(b"HTTP/1.1 200 ")


def test_one_address_holds_at_most_its_cap() -> None:
    with serve("memory://", "--max-client-connections", "5") as base:
        held = [connect(base) for _ in range(5)]
        try:
            for sock in held:  # each has been served: the server counts it
                sock.sendall(head("/v1/queues.list", length=2) + b"{}")
                assert read_response(sock).startswith(b"HTTP/1.1 200 ")
            with connect(base) as extra:
                refused = closed_by_server(extra, within=15)
                assert refused.startswith(b"HTTP/1.1 503 ")
                assert b"at most 5 from one address" in refused
            held.pop().close()
            wait_for(
                lambda: (
                    httpx.post(f"{base}/v1/queues.list", json={}, timeout=10).status_code == 200
                ),
                timeout=10,
                message="a closed connection makes room",
            )
        finally:
            for sock in held:
                sock.close()
