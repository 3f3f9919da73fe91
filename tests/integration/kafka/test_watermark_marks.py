"""Published Kafka watermarks never go backwards, even when a changefeed resumes from an older offset.

A new sink (a restarted or failed-over changefeed: nothing in memory) reads the newest watermark
back from the default topic before its first one, and sends none that is not larger. Replayed
rows are still sent (at-least-once).
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.model import RowChange, compose_ts
from sparkcdc.services.tansu import LocalTansu
from sparkcdc.sink import create_sink
from sparkcdc.sink.kafka import KafkaSink
from sparkcdc.sink.kafka.watermark import decode_watermark, last_published_watermark
from tests.integration.kafka.conftest import consume_all, person_table, run_batch

pytestmark = pytest.mark.integration

BASE_MS = 1_700_000_000_000
QUERY = "protocol=canal-json&enable-tidb-extension=true&partition-num=3"


def ts(i: int) -> int:
    return compose_ts(BASE_MS + i, 0)


def batch(ids: range) -> list[tuple[RowChange, object]]:
    table = person_table()
    return [
        (RowChange("I", "test", "person", 1, ts(i), None, (i, f"n{i}", None, Decimal("1.50"))), table)
        for i in ids
    ]


def new_sink(tansu: LocalTansu, topic: str) -> KafkaSink:
    sink = create_sink(tansu.sink_uri(topic, QUERY), ReplicaConfig(), "cf")
    assert isinstance(sink, KafkaSink)
    sink.check()
    return sink


def marks_and_rows(tansu: LocalTansu, topic: str) -> tuple[dict[int, list[int]], list[int]]:
    got = consume_all(tansu.bootstrap, topic, 3)
    marks: dict[int, list[int]] = {}
    rows: list[int] = []
    for p, msgs in got.items():
        for m in msgs:
            v = json.loads(m.value())
            if v["type"] == "TIDB_WATERMARK":
                marks.setdefault(p, []).append(v["_tidb"]["watermarkTs"])
            else:
                rows.append(int(v["data"][0]["id"]))
    return marks, rows


def test_resume_from_an_older_offset_never_publishes_an_older_watermark(
    tansu: LocalTansu, topic: str
) -> None:
    first = new_sink(tansu, topic)
    run_batch(first, batch(range(0, 10)), 0, ts(9))
    run_batch(first, batch(range(10, 20)), 1, ts(19))
    run_batch(first, batch(range(20, 30)), 2, ts(29))
    # The next batch's rows went out but the driver died before its commit: they follow the last
    # watermark in the topic, so the read-back has to look past them (several windows).
    run_batch(first, batch(range(30, 400)), 3, ts(399), commit=False)
    assert last_published_watermark(first.options, topic, 3) == ts(29)

    # Failover: the new owner's meta database says ts(9); its batch ids start again at 0.
    second = new_sink(tansu, topic)
    run_batch(second, batch(range(10, 20)), 0, ts(19))
    run_batch(second, batch(range(20, 25)), 1, ts(24))
    run_batch(second, batch(range(25, 29)), 2, ts(28))
    run_batch(second, batch(range(29, 420)), 3, ts(419))

    marks, rows = marks_and_rows(tansu, topic)
    assert set(marks) == {0, 1, 2}
    for p, seen in marks.items():
        assert seen == [ts(9), ts(19), ts(29), ts(419)], f"partition {p} watermarks {seen}"
    # Replayed rows were sent again; nothing is missing.
    assert sorted(set(rows)) == list(range(420))
    assert len(rows) > 420


def test_a_restarted_sink_with_the_same_checkpoint_sends_no_watermark(tansu: LocalTansu, topic: str) -> None:
    first = new_sink(tansu, topic)
    run_batch(first, batch(range(0, 5)), 0, ts(4))
    second = new_sink(tansu, topic)
    second.commit(0, [], ts(4))
    second.commit(1, [], ts(2))
    marks, _ = marks_and_rows(tansu, topic)
    assert all(seen == [ts(4)] for seen in marks.values())
    second.commit(2, [], ts(6))
    marks, _ = marks_and_rows(tansu, topic)
    assert all(seen == [ts(4), ts(6)] for seen in marks.values())


def test_a_topic_without_watermarks_reads_back_none(tansu: LocalTansu, topic: str) -> None:
    sink = new_sink(tansu, topic)
    assert last_published_watermark(sink.options, topic, 3) is None
    run_batch(sink, batch(range(0, 50)), 0, ts(49), commit=False)
    assert last_published_watermark(sink.options, topic, 3) is None


def test_decode_watermark_per_protocol() -> None:
    from sparkcdc.codec.canal_json.messages import watermark_message

    assert decode_watermark("canal-json", watermark_message(ts(7), BASE_MS)) == ts(7)
    row = b'{"type":"INSERT","data":[{"note":"TIDB_WATERMARK"}],"isDdl":false}'
    assert decode_watermark("canal-json", row) is None
    assert decode_watermark("avro", bytes([0x02]) + ts(7).to_bytes(8, "big")) == ts(7)
    assert decode_watermark("avro", bytes([0x00, 0, 0, 0, 1]) + b"row") is None
    assert decode_watermark("canal-json", None) is None
