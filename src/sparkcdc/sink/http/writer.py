"""Executor side of the HTTP sink: ``HTTPWriter`` encodes rows and POSTs them in batches.

``HTTPPoster`` sends one JSON-array body with the sink's headers and retries (see ``sink.py`` for
the protocol); the driver posts its DDL and watermark messages through it too, encoded by
``make_encoder``.

Request ids come from the rows a request holds (``rows_request_id``), never from Spark's batch
ids, which start again at 0 whenever a changefeed is claimed anew or loses its checkpoint. Where
a request ends comes from the rows too (``ends_request``): at ``batch-size`` messages, at the end
of a batch, and after a row whose (commit_ts, seq) hashes to a cut point. So a replay that starts
at an earlier batch end sends the requests it sent before, with the same ids, and a replay whose
batches are cut elsewhere falls back into step at the next cut point.
"""

from __future__ import annotations

import logging
import time
import zlib
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from sparkcdc.codec.base import CodecOptions, Encoder, build_encoder
from sparkcdc.errors import SinkError, SinkUnavailable
from sparkcdc.model import RowChange, TableInfo
from sparkcdc.sink.base import PartitionWriter, WriterContext
from sparkcdc.sink.http.config import MAX_BACKOFF, HTTPSinkSettings

if TYPE_CHECKING:
    from sparkcdc.config.replica import ReplicaConfig

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 429})
BODY_EXCERPT = 2000

HEADER_CHANGEFEED = "X-Sparkcdc-Changefeed"
HEADER_TS_MIN = "X-Sparkcdc-Commit-Ts-Min"
HEADER_TS_MAX = "X-Sparkcdc-Commit-Ts-Max"
HEADER_REQUEST_ID = "X-Sparkcdc-Request-Id"


def rows_request_id(
    changefeed_id: str,
    first: tuple[int, int],
    last: tuple[int, int],
    rows: int,
    table: tuple[str, str] | None,
) -> str:
    """The request id of a body of row changes: ``{changefeed}:rows:{ts}.{seq}-{ts}.{seq}:{rows}[:{schema.table}]``.

    ``first``/``last`` are the (commit_ts, seq) of the body's first and last row, which order
    every event of a changefeed; ``rows`` is how many row changes the body holds and ``table``
    the one table they all belong to (None when they span several), percent-encoded to keep the
    header ASCII. The same rows always give the same id; different rows never share one.
    """
    rid = f"{changefeed_id}:rows:{first[0]}.{first[1]}-{last[0]}.{last[1]}:{rows}"
    if table is not None:
        rid += ":" + quote(f"{table[0]}.{table[1]}", safe="")
    return rid


def ends_request(row: RowChange, batch_size: int) -> bool:
    """Whether a request ends after ``row`` whatever its size: about one row in ``batch_size``,
    chosen by its (commit_ts, seq) alone, so every run over the same rows cuts at the same rows."""
    if batch_size <= 1:
        return True
    return zlib.crc32(b"%d.%d" % (row.commit_ts, row.seq)) % batch_size == 0


def make_encoder(settings: HTTPSinkSettings, config: ReplicaConfig) -> Encoder:
    """The canal-json encoder for the sink's settings."""
    options = CodecOptions(enable_tidb_extension=settings.enable_tidb_extension)
    return build_encoder("canal-json", config, options)


class HTTPPoster:
    """POSTs JSON-array bodies with retries (one httpx client, opened lazily)."""

    def __init__(self, settings: HTTPSinkSettings, changefeed_id: str) -> None:
        self.settings = settings
        self.changefeed_id = changefeed_id
        self._client: httpx.Client | None = None
        self.requests = 0
        self.retries = 0

    def client(self) -> httpx.Client:
        """The HTTP client (opened on first use)."""
        if self._client is None:
            s = self.settings
            verify: Any = s.verify
            if s.ca:
                import ssl

                verify = ssl.create_default_context(cafile=s.ca)
            self._client = httpx.Client(timeout=s.timeout, verify=verify, follow_redirects=False)
        return self._client

    def close(self) -> None:
        """Close the client."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def post(self, messages: list[bytes], ts_min: int, ts_max: int, request_id: str) -> None:
        """Deliver one body; returns once the endpoint acknowledged it with a 2xx."""
        s = self.settings
        body = b"[" + b",".join(messages) + b"]"
        headers = {
            "Content-Type": "application/json",
            HEADER_CHANGEFEED: self.changefeed_id,
            HEADER_TS_MIN: str(ts_min),
            HEADER_TS_MAX: str(ts_max),
            HEADER_REQUEST_ID: request_id,
        }
        if s.auth_header is not None:
            headers["Authorization"] = s.auth_header
        attempt = 0
        while True:
            wait: float | None = None
            broken = False
            try:
                resp = self.client().post(s.endpoint, content=body, headers=headers)
                self.requests += 1
            except httpx.TransportError as exc:
                reason = f"{type(exc).__name__}: {exc}"
                broken = True
            else:
                if 200 <= resp.status_code < 300:
                    return
                text = _excerpt(resp)
                if resp.status_code < 500 and resp.status_code not in RETRY_STATUS:
                    raise SinkError(
                        f"the HTTP sink {s.uri_redacted} refused {len(messages)} message(s) "
                        f"(commit_ts {ts_min}..{ts_max}) with HTTP {resp.status_code}: {text}"
                    )
                reason = f"HTTP {resp.status_code}: {text}"
                wait = _retry_after(resp)
            if attempt >= s.max_retries:
                raise SinkUnavailable(
                    f"the HTTP sink {s.uri_redacted} did not accept {len(messages)} message(s) "
                    f"(commit_ts {ts_min}..{ts_max}) after {attempt + 1} attempt(s); last error: {reason}"
                )
            attempt += 1
            self.retries += 1
            delay = min(MAX_BACKOFF, s.backoff * (2 ** (attempt - 1)))
            if wait is not None:
                delay = min(MAX_BACKOFF, max(delay, wait))
            log.warning(
                "HTTP sink %s: %s; retry %d/%d in %.2fs",
                s.uri_redacted,
                reason,
                attempt,
                s.max_retries,
                delay,
            )
            if broken:
                # The pool may hold dead keep-alive connections: start afresh.
                self.close()
            time.sleep(delay)


def _excerpt(resp: httpx.Response) -> str:
    try:
        text = resp.text
    except (UnicodeDecodeError, httpx.HTTPError):
        text = repr(resp.content[:BODY_EXCERPT])
    text = text.strip()
    return text[:BODY_EXCERPT] + ("…" if len(text) > BODY_EXCERPT else "") if text else "<empty body>"


def _retry_after(resp: httpx.Response) -> float | None:
    v = resp.headers.get("Retry-After")
    if v is None:
        return None
    try:
        return max(0.0, float(v))
    except ValueError:
        return None


class HTTPWriter(PartitionWriter):
    """Encodes rows and POSTs them in batches of ``batch-size``, in the order written."""

    def __init__(self, settings: HTTPSinkSettings, config: ReplicaConfig, ctx: WriterContext) -> None:
        self.settings = settings
        self.ctx = ctx
        self.encoder = make_encoder(settings, config)
        self.poster = HTTPPoster(settings, ctx.changefeed_id)
        self.buf: list[bytes] = []
        self.ts_min = 0
        self.ts_max = 0
        self.first: tuple[int, int] = (0, 0)
        self.last: tuple[int, int] = (0, 0)
        self.rows = 0
        self.table: tuple[str, str] | None = None
        self.posts = 0
        self.messages = 0
        self.max_commit_ts = 0

    def write(self, row: RowChange, table: TableInfo) -> None:
        """Encode one row; POST when the request is full or ends at this row (``ends_request``)."""
        name = (row.schema, row.table)
        if not self.rows:
            self.ts_min = row.commit_ts
            self.first = (row.commit_ts, row.seq)
            self.table = name
        elif self.table is not None and self.table != name:
            self.table = None
        self.buf.extend(value for _, value in self.encoder.messages(row, table) if value is not None)
        self.ts_max = row.commit_ts
        self.last = (row.commit_ts, row.seq)
        self.rows += 1
        batch_size = self.settings.batch_size
        if len(self.buf) >= batch_size or ends_request(row, batch_size):
            self._flush()

    def request_id(self) -> str:
        """The id of the request being built (see ``rows_request_id``)."""
        return rows_request_id(self.ctx.changefeed_id, self.first, self.last, self.rows, self.table)

    def _flush(self) -> None:
        if self.buf:
            self.poster.post(self.buf, self.ts_min, self.ts_max, self.request_id())
            self.posts += 1
            self.messages += len(self.buf)
            self.max_commit_ts = max(self.max_commit_ts, self.ts_max)
        self.buf = []
        self.rows = 0
        self.table = None

    def close(self) -> dict[str, Any]:
        """POST what is left; every message has then been acknowledged."""
        try:
            self._flush()
            return {
                "posts": self.posts,
                "messages": self.messages,
                "max_commit_ts": self.max_commit_ts,
                "retries": self.poster.retries,
            }
        finally:
            self.poster.close()

    def abort(self) -> None:
        """Drop the buffer and the client."""
        self.buf = []
        self.rows = 0
        self.poster.close()
