"""The Kafka sink against a real broker: topics, partitions, dispatch, DDL, watermarks, large messages."""

from __future__ import annotations

import base64
import json
import zlib
from decimal import Decimal
from pathlib import Path

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import ConfigError, MessageTooLargeError
from sparkcdc.model import DDLEvent, DDLType, RowChange, compose_ts
from sparkcdc.services.tansu import LocalTansu
from sparkcdc.sink import create_sink
from sparkcdc.sink.base import WriterContext
from sparkcdc.sink.kafka import KafkaSink
from sparkcdc.sink.kafka.admin import KafkaAdmin
from tests.integration.kafka.conftest import consume_all, person_table, run_batch

pytestmark = pytest.mark.integration

BASE_MS = 1_700_000_000_000


def ts(i: int) -> int:
    return compose_ts(BASE_MS + i, 0)


def insert(i: int, table: str = "person", name: str | None = None, commit: int | None = None) -> RowChange:
    return RowChange(
        "I",
        "test",
        table,
        1,
        ts(commit if commit is not None else i),
        None,
        (i, name or f"n{i}", None, Decimal("1.50")),
    )


def make_sink(tansu: LocalTansu, topic: str, query: str, toml: str = "") -> KafkaSink:
    sink = create_sink(tansu.sink_uri(topic, query), ReplicaConfig.from_toml(toml), "cf")
    assert isinstance(sink, KafkaSink)
    return sink


def admin_for(tansu: LocalTansu, topic: str) -> KafkaAdmin:
    return make_sink(tansu, topic, "protocol=canal-json").admin()


def test_check_creates_a_missing_topic_with_three_partitions(tansu: LocalTansu, topic: str) -> None:
    sink = make_sink(tansu, topic, "protocol=canal-json")
    assert sink.admin().partition_count(topic) is None
    sink.check()
    assert sink.admin().partition_count(topic) == 3
    assert sink.partitions[topic] == 3
    assert sink.num_writers == 3


def test_partition_num_creates_that_many(tansu: LocalTansu, topic: str) -> None:
    sink = make_sink(tansu, topic, "protocol=canal-json&partition-num=5")
    sink.check()
    assert sink.admin().partition_count(topic) == 5


def test_auto_create_topic_false_refuses_a_missing_topic(tansu: LocalTansu, topic: str) -> None:
    sink = make_sink(tansu, topic, "protocol=canal-json&auto-create-topic=false")
    with pytest.raises(Exception, match="does not exist and auto-create-topic is false"):
        sink.check()


def test_partition_num_larger_than_the_topic_is_refused(tansu: LocalTansu, topic: str) -> None:
    admin_for(tansu, topic).create_topic(topic, 2, 1)
    sink = make_sink(tansu, topic, "protocol=canal-json&partition-num=4")
    with pytest.raises(ConfigError) as exc:
        sink.check()
    assert "the number of partition (4) specified in sink-uri is more than that of actual topic (2)" in str(
        exc.value
    )


def test_partition_num_smaller_uses_only_the_first_n(tansu: LocalTansu, topic: str) -> None:
    admin_for(tansu, topic).create_topic(topic, 4, 1)
    toml = '[sink]\ndispatchers = [{matcher = ["test.*"], partition = "ts"}]\n'
    sink = make_sink(tansu, topic, "protocol=canal-json&partition-num=2&enable-tidb-extension=true", toml)
    sink.check()
    table = person_table()
    run_batch(sink, [(insert(i), table) for i in range(20)], 1, ts(19))
    got = consume_all(tansu.bootstrap, topic, 4)
    assert got[2] == [] and got[3] == []
    for p in (0, 1):
        values = [json.loads(m.value()) for m in got[p]]
        rows = [v for v in values if v["type"] == "INSERT"]
        assert [int(r["data"][0]["id"]) for r in rows] == [i for i in range(20) if ts(i) % 2 == p]
        assert values[-1]["type"] == "TIDB_WATERMARK"
        assert values[-1]["_tidb"]["watermarkTs"] == ts(19)


def test_fixed_partition_out_of_range_is_refused(tansu: LocalTansu, topic: str) -> None:
    toml = '[sink]\ndispatchers = [{matcher = ["test.*"], partition = "3"}]\n'
    sink = make_sink(tansu, topic, "protocol=canal-json", toml)
    with pytest.raises(ConfigError, match="out of range"):
        sink.check()


def test_rows_ddl_and_watermarks_in_commit_order(tansu: LocalTansu, topic: str) -> None:
    sink = make_sink(tansu, topic, "protocol=canal-json&enable-tidb-extension=true")
    sink.check()
    person, other = person_table(), person_table(table="other")
    ddl = DDLEvent(
        "CREATE TABLE other (id int primary key)", "test", "other", DDLType.CREATE_TABLE, ts(0), ts(0)
    )
    sink.apply_ddl(ddl)
    items = [(insert(i, "person" if i % 2 else "other"), person if i % 2 else other) for i in range(1, 41)]
    # an UPDATE that changes the primary key is split into DELETE + INSERT (spec §7)
    upd = RowChange(
        "U", "test", "person", 1, ts(41), (1, "n1", None, Decimal("1.50")), (100, "n1", None, None)
    )
    items.append((upd, person))
    run_batch(sink, items, 1, ts(41))
    got = consume_all(tansu.bootstrap, topic, 3)

    ddl_msgs = [(p, json.loads(m.value())) for p in got for m in got[p] if json.loads(m.value())["isDdl"]]
    assert [(p, v["sql"], v["type"]) for p, v in ddl_msgs] == [(0, ddl.query, "CREATE")]
    for name in ("person", "other"):
        expected_p = zlib.crc32(f"test{name}".encode()) % 3
        for p in range(3):
            rows = [json.loads(m.value()) for m in got[p]]
            rows = [r for r in rows if r["table"] == name and not r["isDdl"]]
            if p != expected_p:
                assert rows == []
                continue
            commit_ts = [r["_tidb"]["commitTs"] for r in rows]
            assert commit_ts == sorted(commit_ts)
            if name == "person":
                assert [r["type"] for r in rows][-2:] == ["DELETE", "INSERT"]
                assert rows[-2]["data"][0]["id"] == "1" and rows[-1]["data"][0]["id"] == "100"
                assert len(rows) == 22
            else:
                assert len(rows) == 20
    for p in range(3):
        last = json.loads(got[p][-1].value())
        assert last["type"] == "TIDB_WATERMARK" and last["_tidb"]["watermarkTs"] == ts(41)
        assert got[p][-1].key() is None


def test_watermark_goes_to_every_topic_in_use(tansu: LocalTansu, topic: str) -> None:
    toml = (
        '[sink]\ndispatchers = [{matcher = ["test.*"], topic = "'
        + topic
        + '_{table}", partition = "table"}]\n'
    )
    sink = make_sink(tansu, topic, "protocol=canal-json&enable-tidb-extension=true&partition-num=2", toml)
    sink.check()
    table = person_table()
    run_batch(sink, [(insert(i), table) for i in range(5)], 1, ts(5))
    dyn = f"{topic}_person"
    assert sink.admin().partition_count(dyn) == 2
    for t in (topic, dyn):
        got = consume_all(tansu.bootstrap, t, 2)
        for p in range(2):
            assert json.loads(got[p][-1].value())["_tidb"] == {"watermarkTs": ts(5)}
    # the same checkpoint again sends nothing new
    sink.commit(2, [], ts(5))
    assert sum(len(v) for v in consume_all(tansu.bootstrap, topic, 2).values()) == 2


def test_index_value_dispatch_matches_ticdc_hash(tansu: LocalTansu, topic: str) -> None:
    toml = '[sink]\ndispatchers = [{matcher = ["test.*"], partition = "index-value"}]\n'
    sink = make_sink(tansu, topic, "protocol=canal-json&partition-num=4", toml)
    sink.check()
    assert sink.num_writers == 1  # a split UPDATE may span partitions: one producer keeps the order
    table = person_table()
    run_batch(sink, [(insert(i), table) for i in range(30)], 1, ts(30))
    got = consume_all(tansu.bootstrap, topic, 4)
    seen = 0
    for p in range(4):
        for m in got[p]:
            row_id = json.loads(m.value())["data"][0]["id"]
            h = zlib.crc32(b"testperson") ^ zlib.crc32(b"id" + row_id.encode())
            assert h % 4 == p
            seen += 1
    assert seen == 30


def test_message_too_large_names_table_size_and_limit(tansu: LocalTansu, topic: str) -> None:
    sink = make_sink(tansu, topic, "protocol=canal-json&max-message-bytes=600")
    sink.check()
    table = person_table()
    w = sink.open_writer(WriterContext("cf", 1, 0))
    w.write(insert(1, name="x" * 50), table)
    with pytest.raises(MessageTooLargeError) as exc:
        w.write(insert(2, name="y" * 1000), table)
        w.close()
    msg = str(exc.value)
    assert "an INSERT of a row of table `test`.`person` (commit_ts " in msg
    assert "bytes, larger than max-message-bytes 600" in msg
    assert "handle-key-only or claim-check" in msg


def test_handle_key_only_sends_the_key_columns(tansu: LocalTansu, topic: str) -> None:
    toml = '[sink.kafka-config.large-message-handle]\nlarge-message-handle-option = "handle-key-only"\n'
    sink = make_sink(
        tansu,
        topic,
        "protocol=canal-json&max-message-bytes=600&enable-tidb-extension=true&partition-num=1",
        toml,
    )
    sink.check()
    table = person_table()
    run_batch(
        sink, [(insert(1, name="small"), table), (insert(2, name="z" * 2000, commit=2), table)], 1, ts(2)
    )
    values = [json.loads(m.value()) for m in consume_all(tansu.bootstrap, topic, 1)[0]]
    assert values[0]["data"][0]["name"] == "small" and "onlyHandleKey" not in values[0]["_tidb"]
    assert values[1]["data"] == [{"id": "2"}]
    assert values[1]["_tidb"] == {"commitTs": ts(2), "onlyHandleKey": True}


def test_claim_check_stores_the_full_message(tansu: LocalTansu, topic: str, tmp_path: Path) -> None:
    store = tmp_path / "claims"
    toml = (
        "[sink.kafka-config.large-message-handle]\n"
        'large-message-handle-option = "claim-check"\n'
        f'claim-check-storage-uri = "file://{store}"\n'
    )
    sink = make_sink(
        tansu,
        topic,
        "protocol=canal-json&max-message-bytes=600&enable-tidb-extension=true&partition-num=1",
        toml,
    )
    sink.check()
    table = person_table()
    big = insert(7, name="<big>" * 400)
    run_batch(sink, [(big, table)], 1, ts(7))
    values = [json.loads(m.value()) for m in consume_all(tansu.bootstrap, topic, 1)[0]]
    ref = values[0]
    location = ref["_tidb"]["claimCheckLocation"]
    assert location.startswith(f"file://{store}/") and location.endswith(".json")
    assert ref["data"] == [{"id": "7"}]
    files = list(store.iterdir())
    assert [f.name for f in files] == [location.rsplit("/", 1)[1]]
    body = json.loads(files[0].read_text())
    assert body["key"] is None
    full = json.loads(base64.b64decode(body["value"]))
    assert full["data"][0]["name"] == "<big>" * 400
    assert full["_tidb"] == {"commitTs": ts(7)}
