"""A fault-injecting HTTP proxy in front of moto's S3 server (a shim: moto cannot be told to answer 5xx).

Every request is forwarded to the real server unchanged; while ``failing`` is set, the proxy answers
instead with ``503 SlowDown`` (or the status given), as S3 does when it sheds load.
"""

from __future__ import annotations

import http.client
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sparkcdc.services.common import free_port

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


class FaultyS3Proxy:
    """``http://127.0.0.1:PORT`` forwarding to ``target`` (host, port), or failing on demand."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self.failing: int | None = None
        """The status every request gets while set (503, 500), else None: requests pass."""
        self.failed = 0
        self.forwarded = 0
        self.refused: list[tuple[float, str, str, int, bytes]] = []
        """Forwarded requests the server answered with an error: (time, method, path, status, body)."""
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="s3-proxy", daemon=True)

    @property
    def endpoint(self) -> str:
        """The proxy's URL, to be used as the S3 endpoint."""
        return f"http://127.0.0.1:{self.port}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: the test reports the counts

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    out = b""
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass  # trailers
                            return out
                        out += self.rfile.read(size)
                        self.rfile.readline()
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _relay(self) -> None:
                body = self._body()
                status = proxy.failing
                if status is not None:
                    with proxy._lock:
                        proxy.failed += 1
                    payload = (
                        b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
                        b"<Message>injected by the test proxy</Message></Error>"
                    )
                    self.send_response(status)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(payload)
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    headers["Content-Length"] = str(len(body))
                conn = http.client.HTTPConnection(*proxy.target, timeout=60)
                try:
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                    self.send_response(resp.status, resp.reason)
                    for k, v in resp.getheaders():
                        if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                            self.send_header(k, v)
                    length = resp.getheader("Content-Length")
                    self.send_header(
                        "Content-Length", length if self.command == "HEAD" and length else str(len(data))
                    )
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    conn.close()
                with proxy._lock:
                    proxy.forwarded += 1
                    if resp.status >= 400 and not (self.command == "HEAD" and resp.status == 404):
                        proxy.refused.append((time.time(), self.command, self.path, resp.status, data[:300]))

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay

        return Handler

    def start(self) -> FaultyS3Proxy:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FaultyS3Proxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
