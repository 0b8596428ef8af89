"""A Slack stand-in: a real HTTP server on 127.0.0.1 that records webhook bodies.

`plan` is a list of responses to give, in order (status, headers); when it runs out every
request gets 200 "ok". Tests use it to simulate 429 with Retry-After, 5xx and outages.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class SlackStandIn:
    def __init__(self, plan: list[tuple[int, dict[str, str]]] | None = None) -> None:
        self.plan = list(plan or [])
        self.received: list[dict] = []  # bodies answered 200
        self.attempts: list[float] = []  # time of every request
        self.lock = threading.Lock()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server calls it by this name
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length)
                with stand_in.lock:
                    stand_in.attempts.append(time.monotonic())
                    status, headers = stand_in.plan.pop(0) if stand_in.plan else (200, {})
                    if status == 200:
                        stand_in.received.append(json.loads(body))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                text = b"ok" if status == 200 else b"error"
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/services/T000/B000/secret-token-xyz"

    def __enter__(self) -> SlackStandIn:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
