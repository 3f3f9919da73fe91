"""HTTPSink against a real local HTTP server: order, headers, retries, outages, 4xx, redaction."""

from __future__ import annotations

import logging
import pickle
import threading
from typing import Any

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.config.uri import redact_uri
from sparkcdc.errors import ConfigError, SinkError, SinkUnavailable
from sparkcdc.model import ColumnInfo, DDLEvent, DDLType, IndexInfo, RowChange, TableInfo
from sparkcdc.services.common import wait_until
from sparkcdc.sink import create_sink
from sparkcdc.sink.base import WriterContext
from sparkcdc.sink.http import HTTPSink, HTTPWriter

from .conftest import Receiver

pytestmark = pytest.mark.integration

SECRET = "Bearer s3cr3t-t0ken"
SECRET_Q = "Bearer%20s3cr3t-t0ken"
TABLE = TableInfo(
    "shop",
    "orders",
    (ColumnInfo("id", "int", nullable=False), ColumnInfo("note", "varchar", length=20)),
    (IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
)


def rows(n: int, start_ts: int = 1 << 30) -> list[RowChange]:
    """n inserts, three rows per transaction."""
    return [
        RowChange("I", "shop", "orders", 0, start_ts + i // 3, None, (i, f"n<{i}>"), seq=i % 3)
        for i in range(n)
    ]


def sink_for(receiver: Receiver, query: str) -> HTTPSink:
    s = create_sink(f"{receiver.url}/cdc/events?{query}", ReplicaConfig(), "cf-http")
    assert isinstance(s, HTTPSink)
    # Writers run in executors: the sink travels pickled.
    copy = pickle.loads(pickle.dumps(s))
    assert isinstance(copy, HTTPSink)
    return copy


def write_all(sink: HTTPSink, changes: list[RowChange], batch_id: int = 1) -> dict[str, Any]:
    w = sink.open_writer(WriterContext("cf-http", batch_id, 0))
    for r in changes:
        w.write(r, TABLE)
    return w.close()


def delivered_ids(receiver: Receiver) -> list[int]:
    return [int(m["data"][0]["id"]) for req in receiver.accepted for m in req.body]


def test_batches_arrive_in_commit_order_with_headers(receiver: Receiver) -> None:
    sink = sink_for(receiver, f"protocol=canal-json&batch-size=64&auth-header={SECRET_Q}")
    sink.check()
    changes = rows(1000)
    msg = write_all(sink, changes)
    # At most batch-size messages per request; requests also end at rows that hash to a cut point.
    assert msg["messages"] == 1000 and 16 <= msg["posts"] <= 1000 // 16
    assert all(len(r.body) <= 64 for r in receiver.accepted)
    assert delivered_ids(receiver) == list(range(1000))
    ts_max_prev = 0
    for req in receiver.accepted:
        h = {k.lower(): v for k, v in req.headers.items()}
        assert req.path == "/cdc/events"
        assert h["x-sparkcdc-changefeed"] == "cf-http"
        assert h["authorization"] == SECRET
        assert h["content-type"] == "application/json"
        es = [m["es"] for m in req.body]
        assert all(m["type"] == "INSERT" and m["database"] == "shop" for m in req.body)
        ts_min, ts_max = int(h["x-sparkcdc-commit-ts-min"]), int(h["x-sparkcdc-commit-ts-max"])
        assert ts_min <= ts_max and ts_min >= ts_max_prev and es == sorted(es)
        ts_max_prev = ts_max
    first = receiver.accepted[0]
    assert int(first.headers["X-Sparkcdc-Commit-Ts-Min"]) == changes[0].commit_ts
    assert int(receiver.accepted[-1].headers["X-Sparkcdc-Commit-Ts-Max"]) == changes[-1].commit_ts
    assert len({r.headers["X-Sparkcdc-Request-Id"] for r in receiver.accepted}) == msg["posts"]
    assert first.body[0]["data"][0]["note"] == "n<0>"


def test_5xx_is_retried_with_backoff_without_loss(receiver: Receiver) -> None:
    sink = sink_for(receiver, "batch-size=100&backoff=10ms&max-retries=5")
    receiver.fail(3, 503, "maintenance")
    msg = write_all(sink, rows(250))
    assert msg["retries"] == 3
    assert [r.status for r in receiver.requests] == [503, 503, 503] + [200] * msg["posts"]
    # The retried request is the same body with the same request id.
    assert receiver.requests[0].body == receiver.requests[3].body
    assert (
        receiver.requests[0].headers["X-Sparkcdc-Request-Id"]
        == receiver.requests[3].headers["X-Sparkcdc-Request-Id"]
    )
    assert delivered_ids(receiver) == list(range(250))


def test_outage_with_the_server_down_then_back(receiver: Receiver) -> None:
    sink = sink_for(receiver, "batch-size=50&backoff=50ms&max-retries=30")
    changes = rows(200)
    w = sink.open_writer(WriterContext("cf-http", 1, 0))
    assert isinstance(w, HTTPWriter)
    for r in changes[:50]:
        w.write(r, TABLE)  # first body delivered
    receiver.stop()
    result: dict[str, Any] = {}

    def rest() -> None:
        try:
            for r in changes[50:]:
                w.write(r, TABLE)
            result["msg"] = w.close()
        except BaseException as exc:  # reported by the assertion below
            result["error"] = exc

    t = threading.Thread(target=rest)
    t.start()
    wait_until(
        lambda: w.poster.retries >= 2, timeout=20, what="connection retries while the receiver is down"
    )
    receiver.start()
    t.join(timeout=60)
    assert "error" not in result, result.get("error")
    assert result["msg"]["messages"] == 200 and result["msg"]["retries"] >= 2
    assert delivered_ids(receiver) == list(range(200))


def test_retries_run_out_into_a_transient_error(receiver: Receiver, caplog: pytest.LogCaptureFixture) -> None:
    sink = sink_for(receiver, f"backoff=10ms&max-retries=2&auth-header={SECRET_Q}")
    receiver.fail(10, 502, "bad gateway")
    with caplog.at_level(logging.DEBUG), pytest.raises(SinkUnavailable) as ei:
        write_all(sink, rows(5))
    assert ei.value.transient
    assert "after 3 attempt(s)" in ei.value.message and "bad gateway" in ei.value.message
    assert len(receiver.requests) == 3
    assert "s3cr3t" not in ei.value.message and "s3cr3t" not in caplog.text
    assert "auth-header=xxxxx" in ei.value.message


def test_4xx_fails_with_the_response_body(receiver: Receiver, caplog: pytest.LogCaptureFixture) -> None:
    sink = sink_for(receiver, f"backoff=10ms&auth-header={SECRET_Q}")
    receiver.fail(1, 422, '{"error": "column note is not allowed"}')
    with caplog.at_level(logging.DEBUG), pytest.raises(SinkError) as ei:
        write_all(sink, rows(5))
    assert not ei.value.transient
    assert "HTTP 422" in ei.value.message and "column note is not allowed" in ei.value.message
    assert len(receiver.requests) == 1  # no retry
    assert "s3cr3t" not in ei.value.message and "s3cr3t" not in caplog.text


def test_redaction_everywhere(receiver: Receiver) -> None:
    uri = f"{receiver.url}/x?auth-header={SECRET_Q}&batch-size=2"
    sink = create_sink(uri, ReplicaConfig(), "cf")
    assert "s3cr3t" not in redact_uri(uri)
    assert "s3cr3t" not in repr(sink) and "s3cr3t" not in repr(sink.settings)  # type: ignore[attr-defined]
    with pytest.raises(ConfigError) as ei:
        create_sink(uri + "&unknown-key=1", ReplicaConfig(), "cf")
    assert "unknown-key" in str(ei.value) and "s3cr3t" not in str(ei.value)


def test_ddl_and_watermark_are_posted_in_order(receiver: Receiver) -> None:
    sink = sink_for(receiver, "enable-tidb-extension=true&batch-size=10")
    ddl_ts = (1 << 30) - 5
    sink.apply_ddl(
        DDLEvent(
            "CREATE TABLE orders (id INT PRIMARY KEY, note VARCHAR(20))",
            "shop",
            "orders",
            DDLType.CREATE_TABLE,
            ddl_ts,
            ddl_ts,
        )
    )
    changes = rows(12)
    msg = write_all(sink, changes)
    sink.commit(1, [msg], changes[-1].commit_ts)
    sink.close()
    kinds = [(m["isDdl"], m["type"]) for req in receiver.accepted for m in req.body]
    assert kinds[0] == (True, "CREATE")
    assert kinds[1:13] == [(False, "INSERT")] * 12
    assert kinds[13] == (False, "TIDB_WATERMARK")
    assert receiver.accepted[-1].body[0]["_tidb"] == {"watermarkTs": changes[-1].commit_ts}
    assert receiver.accepted[1].body[0]["_tidb"] == {"commitTs": changes[0].commit_ts}


def test_check_reports_an_unreachable_receiver(receiver: Receiver) -> None:
    sink = sink_for(receiver, "timeout=2s")
    receiver.stop()
    with pytest.raises(SinkUnavailable, match=f"127.0.0.1:{receiver.port}"):
        sink.check()
