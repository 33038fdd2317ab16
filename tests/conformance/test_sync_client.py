"""The sync client's own behaviour: its event loop thread, closing, exiting."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from querator import Item, Querator
from querator.errors import UsageError


def test_exit_without_close_does_not_hang(backend_url: str, qname: str) -> None:
    """A program that forgets close() (or dies of an exception) still exits,
    and what it produced before is stored."""
    if backend_url == "memory://":
        pytest.skip("a memory:// store lives inside one process")
    program = textwrap.dedent(
        f"""
        from querator import Item, Querator
        q = Querator({backend_url!r})
        q.create_queue({qname!r})
        q.produce({qname!r}, [Item(payload=b"kept")])
        raise RuntimeError("the program fails without closing its client")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done.stderr
    assert "the program fails" in done.stderr
    with Querator(backend_url) as q:
        [leased] = q.lease(qname, client_id="after", batch_size=10)
        assert leased.payload == b"kept"


def test_closed_client_refuses_calls(backend_url: str, qname: str) -> None:
    q = Querator(backend_url)
    q.create_queue(qname)
    q.close()
    q.close()  # closing twice is fine
    with pytest.raises(UsageError, match="closed"):
        q.produce(qname, [Item(payload=b"x")])


@pytest.mark.anyio
async def test_sync_client_inside_event_loop_is_refused(
    backend_url: str, qname: str, anyio_backend: str
) -> None:
    with Querator(backend_url) as q, pytest.raises(UsageError, match=r"AsyncQuerator\.produce"):
        q.produce(qname, [Item(payload=b"x")])


def test_errors_cross_the_thread_with_their_type(q: Querator, qname: str) -> None:
    from querator.errors import QueueNotFound

    with pytest.raises(QueueNotFound):
        q.produce(qname, [Item(payload=b"x")])
