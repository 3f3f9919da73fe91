"""The HTTP sink: POST canal-json change events, in commit order, to a web endpoint.

Body: a JSON array of canal-json messages (``Content-Type: application/json``),
each message exactly what the Kafka sink would send (``CanalJsonEncoder``);
at most ``batch-size`` messages per request. Rows, DDLs (POSTed from the
driver, after every earlier row) and, with ``enable-tidb-extension=true``,
a ``TIDB_WATERMARK`` message after each committed batch (never a smaller one than
this sink posted before).

A request of rows ends at ``batch-size`` messages, at the end of a Spark batch, or after a
row whose (commit_ts, seq) hashes to a cut point (about one row in ``batch-size``): where
requests end depends on the rows, not on where a run started, so a replay over rows that were
already sent sends the same requests again.

Headers on every request:

- ``X-Sparkcdc-Changefeed``: the changefeed id;
- ``X-Sparkcdc-Commit-Ts-Min`` / ``X-Sparkcdc-Commit-Ts-Max``: the commit_ts range of the body;
- ``X-Sparkcdc-Request-Id``: made of the body's content, never of Spark's batch ids (which start
  again at 0 when a changefeed is claimed anew): for rows
  ``{changefeed}:rows:{commit_ts}.{seq}-{commit_ts}.{seq}:{rows}[:{schema}.{table}]`` (the first
  and last row's (commit_ts, seq), how many rows, and the table when the body holds one, its
  name percent-encoded), for a DDL ``{changefeed}:ddl:{commit_ts}:{seq}``, for a watermark
  ``{changefeed}:resolved:{ts}``. The same rows always get the same id, in retries, replays
  after a restart and after a failover; different rows never share one. A receiver may drop a
  request whose id it already processed (delivery is at-least-once);
- ``Authorization``: the ``auth-header`` value, if given (never logged: messages show the
  redacted URI).

A 2xx answer acknowledges the body. 5xx, 408, 429 and connection errors or timeouts
are retried with exponential backoff (honouring ``Retry-After``) up to ``max-retries``
times, then ``SinkUnavailable`` (transient) is raised and the batch is retried later
by the pipeline. Any other status (4xx, 3xx) fails the changefeed with ``SinkError``
carrying the status and the response body. ``num_writers`` is 1, so requests follow
the global commit order.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from sparkcdc.errors import SinkUnavailable
from sparkcdc.sink.base import PartitionWriter, Sink, SinkCapabilities, WriterContext, mark_every_s
from sparkcdc.sink.http.config import parse_http_sink
from sparkcdc.sink.http.writer import HTTPPoster, HTTPWriter, make_encoder

if TYPE_CHECKING:
    from sparkcdc.codec.base import Encoder
    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.model import DDLEvent, RowChange, TableInfo


class HTTPSink(Sink):
    """``http://`` and ``https://`` sinks (see the module docstring)."""

    scheme = "http"

    def __init__(self, uri: str, config: ReplicaConfig, changefeed_id: str = "default") -> None:
        super().__init__(uri, config, changefeed_id)
        self.settings = parse_http_sink(uri, config)
        self._poster: HTTPPoster | None = None
        self._encoder: Encoder | None = None
        self._ddl_seq = 0
        self._last_watermark = 0

    def __repr__(self) -> str:
        return f"HTTPSink({self.settings.uri_redacted!r}, changefeed_id={self.changefeed_id!r})"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_poster"] = None  # driver-side client
        state["_encoder"] = None
        return state

    @property
    def num_writers(self) -> int:
        """One writer: requests follow the global commit order."""
        return 1

    def route(self, row: RowChange, table: TableInfo) -> int:
        """Every row goes to the single writer."""
        return 0

    @property
    def capabilities(self) -> SinkCapabilities:
        # request ids come from the rows a request carries: a receiver that drops repeated ids
        return SinkCapabilities(
            idempotence="",
            # a mark is a watermark request only with the TiDB extension
            resolved_every_s=mark_every_s(self._encoding().encode_watermark(0)),
        )

    def check(self) -> None:
        """Open a TCP connection to the endpoint's host and port (no request is sent)."""
        parts = urlsplit(self.settings.endpoint)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            with socket.create_connection((host, port), timeout=self.settings.timeout):
                pass
        except OSError as exc:
            raise SinkUnavailable(
                f"cannot reach the HTTP sink {self.settings.uri_redacted} ({host}:{port}: {exc}); "
                "check the host and port and that the receiver is running"
            ) from exc

    def _driver(self) -> tuple[HTTPPoster, Encoder]:
        if self._poster is None:
            self._poster = HTTPPoster(self.settings, self.changefeed_id)
        return self._poster, self._encoding()

    def _encoding(self) -> Encoder:
        if self._encoder is None:
            self._encoder = make_encoder(self.settings, self.config)
        return self._encoder

    def apply_ddl(self, ddl: DDLEvent) -> None:
        """POST the DDL as one canal-json DDL message (after every earlier row was acknowledged)."""
        poster, encoder = self._driver()
        rid = f"{self.changefeed_id}:ddl:{ddl.commit_ts}:{ddl.seq}"
        message = encoder.encode_ddl(ddl)
        if message is not None:
            poster.post([message], ddl.commit_ts, ddl.commit_ts, rid)

    def open_writer(self, ctx: WriterContext) -> PartitionWriter:
        """The single writer of a batch."""
        return HTTPWriter(self.settings, self.config, ctx)

    def commit(self, batch_id: int, messages: list[dict[str, Any]], checkpoint_ts: int) -> None:
        """With the TiDB extension, POST a TIDB_WATERMARK for the new checkpoint (if it moved forward)."""
        if checkpoint_ts <= self._last_watermark:
            return
        poster, encoder = self._driver()
        wm = encoder.encode_watermark(checkpoint_ts)
        if wm is not None:
            poster.post([wm], checkpoint_ts, checkpoint_ts, f"{self.changefeed_id}:resolved:{checkpoint_ts}")
        self._last_watermark = checkpoint_ts

    def close(self) -> None:
        """Close the driver's client."""
        if self._poster is not None:
            self._poster.close()
            self._poster = None
