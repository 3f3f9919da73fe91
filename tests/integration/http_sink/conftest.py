"""A real local HTTP receiver that records requests and can be told to fail or go away."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from sparkcdc.services.common import free_port, port_open, wait_until


@dataclass
class Request:
    """One request as the receiver saw it."""

    path: str
    headers: dict[str, str]
    body: Any
    status: int


class Receiver:
    """ThreadingHTTPServer on 127.0.0.1 that records every POST; ``fail`` queues error answers."""

    def __init__(self) -> None:
        self.port = free_port()
        self.requests: list[Request] = []
        self.failures: list[tuple[int, str]] = []
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def accepted(self) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if 200 <= r.status < 300]

    def fail(self, times: int, status: int = 503, body: str = "busy") -> None:
        """Answer the next ``times`` requests with ``status`` and ``body``."""
        with self.lock:
            self.failures.extend([(status, body)] * times)

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                with receiver.lock:
                    status, text = receiver.failures.pop(0) if receiver.failures else (200, "ok")
                    receiver.requests.append(
                        Request(self.path, dict(self.headers.items()), json.loads(raw), status)
                    )
                payload = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        wait_until(lambda: port_open("127.0.0.1", self.port), timeout=10, what="HTTP receiver")

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None


@pytest.fixture()
def receiver() -> Iterator[Receiver]:
    """A running receiver, stopped after the test."""
    r = Receiver()
    r.start()
    yield r
    r.stop()
