"""HTTPS: the worker connects to the address it checked, and the certificate
is verified against the endpoint's host name (the SNI), not that address."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from polling import wait_for

from querator import Querator
from querator.webhooks import DeliveryWorker, Outcome, Webhooks
from webhooks.helpers import FAST, check_signed, until_len
from webhooks.http_receiver import Receiver, serving


@pytest.fixture
def tls_receiver(tmp_path: Path) -> Iterator[tuple[Receiver, str]]:
    """An HTTPS receiver whose certificate names ``localhost`` only, and its CA file."""
    ca = trustme.CA()
    cert = ca.issue_cert("localhost")
    certfile, keyfile, ca_file = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    cert.cert_chain_pems[0].write_to_path(str(certfile))
    cert.private_key_pem.write_to_path(str(keyfile))
    ca.cert_pem.write_to_path(str(ca_file))
    with serving(tls=(str(certfile), str(keyfile))) as running:
        yield running, str(ca_file)


@pytest.mark.parametrize("backend_name", ["memory"], indirect=True)
def test_https_is_pinned_to_the_checked_address_and_verified_by_name(
    q: Querator, tls_receiver: tuple[Receiver, str]
) -> None:
    receiver, ca_file = tls_receiver
    settings = FAST.model_copy(update={"ca_file": ca_file})
    hooks = Webhooks(q, settings)
    by_name = hooks.add_endpoint(f"https://localhost:{receiver.port}/ok")
    by_address = hooks.add_endpoint(f"https://127.0.0.1:{receiver.port}/ok")
    message = hooks.send("a.b", {"n": 1})
    worker = DeliveryWorker(q, settings, endpoint_ttl=0.2)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        [got] = until_len(lambda: receiver.at("ok"), 1)
        log = until_len(lambda: hooks.attempts(message_id=message.id), 4)
    finally:
        worker.stop()
        thread.join(timeout=10)
    assert got.headers["host"] == f"localhost:{receiver.port}"
    assert check_signed(by_name.secret, got) == {"n": 1}
    mine = [a for a in log if a.endpoint_id == by_name.id]
    assert [a.outcome for a in mine] == [Outcome.DELIVERED]
    # the certificate names localhost, not 127.0.0.1: a URL by address fails verification
    theirs = [a for a in log if a.endpoint_id == by_address.id]
    assert [a.outcome for a in theirs] == [Outcome.RETRYING, Outcome.RETRYING, Outcome.DEAD]
    assert all("CERTIFICATE_VERIFY_FAILED" in a.error for a in theirs), theirs[0].error
    wait_for(lambda: hooks.failed(endpoint_id=by_address.id))
