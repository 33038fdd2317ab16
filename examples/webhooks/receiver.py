"""A webhook receiver: checks each webhook's signature with
``querator.webhooks.verify`` and processes each message once, even when it is
delivered twice (deduplication by ``webhook-id``).

Run:  python examples/webhooks/receiver.py PORT WHSEC_SECRET
It prints one line per new message; a duplicate is acknowledged and skipped;
a bad signature gets 400.
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from querator.webhooks import VerificationFailed, verify


def make_handler(secret: str) -> type[BaseHTTPRequestHandler]:
    """A request handler bound to ``secret``."""
    seen: set[str] = set()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            try:
                event = verify(secret, dict(self.headers.items()), body)
            except VerificationFailed as exc:
                self.send_response(400)
                self.end_headers()
                self.wfile.write(str(exc).encode())
                return
            msg_id = self.headers["webhook-id"]
            if msg_id not in seen:  # at-least-once delivery: process each id once
                seen.add(msg_id)
                print(f"received {msg_id}: {json.dumps(event)}", flush=True)
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: the prints above are the output."""

    return Handler


def main() -> None:
    """Serve on 127.0.0.1:PORT until killed."""
    port, secret = int(sys.argv[1]), sys.argv[2]
    server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(secret))
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
