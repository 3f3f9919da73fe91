"""The snapshot written straight from the spool to Kafka (tasks in parallel) and MySQL (one task per route group).

Changes after the handover point S make the binlog corrections non-empty, so the rows each sink
receives must be the tables as they were at S: the spooled rows without the touched keys, plus
the touched keys' rows at S.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.capture import snapshot as cs
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.pipeline.snapshot import SnapshotOptions
from sparkcdc.pipeline.snapshot.write import direct_groups
from sparkcdc.pipeline.writer import BatchWriter
from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.tansu import LocalTansu
from tests.integration.snapshot.test_snapshot_spark import _snapshot, _state

pytestmark = [pytest.mark.integration, pytest.mark.spark]

TABLES = ["t", "u"]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from sparkcdc.pipeline.spark import get_spark

    yield get_spark("local[2]")


@pytest.fixture(scope="module")
def downstream() -> Iterator[LocalMariaDB]:
    with LocalMariaDB() as db:
        yield db


def _fill(db: LocalMariaDB, schema: str) -> None:
    db.execute(
        f"CREATE TABLE `{schema}`.t (id INT PRIMARY KEY, v VARCHAR(20), d DECIMAL(10,3), b VARBINARY(4))",
        f"INSERT INTO `{schema}`.t SELECT seq, CONCAT('v', seq), seq / 8, x'00FF' FROM `{schema}`.seq_1_to_3000",
        f"CREATE TABLE `{schema}`.u (a INT NOT NULL, b VARCHAR(5) NOT NULL, c DATETIME(3), UNIQUE KEY k (a, b))",
        f"INSERT INTO `{schema}`.u SELECT seq, 'x', '2024-01-01' + INTERVAL seq SECOND FROM `{schema}`.seq_1_to_700",
    )


def _change(db: LocalMariaDB, schema: str) -> None:
    db.execute(
        f"UPDATE `{schema}`.t SET v = 'changed' WHERE id IN (5, 1500, 2999)",
        f"DELETE FROM `{schema}`.t WHERE id IN (6, 14, 1600)",
        f"INSERT INTO `{schema}`.t VALUES (5000, 'new', 1.5, NULL), (0, 'new', 2.5, x'01')",
        f"UPDATE `{schema}`.t SET id = 7000 WHERE id = 10",
        f"UPDATE `{schema}`.u SET b = 'y' WHERE a = 3",
        f"DELETE FROM `{schema}`.u WHERE a > 650",
    )


def _run(spark: Any, db: LocalMariaDB, schema: str, tmp: Path, sink: Any) -> tuple[Any, dict[str, Any]]:
    snap = _snapshot(spark, db, schema, tmp, options=SnapshotOptions(chunk_size=300), time_zone="UTC")
    writer = BatchWriter(sink, str(tmp / "spark"), snap.history_path, "snap-sink", lambda r: None)
    _change(db, schema)
    report = snap.run(lambda df, ts: pytest.fail("the spool is written straight to the sink"), writer)
    assert report["touched_keys"] >= 10
    return snap, report


def test_kafka_gets_the_state_at_s_from_parallel_tasks(
    spark: Any,
    mariadb: LocalMariaDB,
    fresh_db: str,
    tansu: LocalTansu,
    tmp_path: Path,
) -> None:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    from sparkcdc.codec.canal_json.decoder import canal_message_to_row_change, decode_canal_json
    from sparkcdc.sink import create_sink

    _fill(mariadb, fresh_db)
    at_s = _state(mariadb, fresh_db, TABLES)
    topic = "snap-" + uuid.uuid4().hex[:8]
    cfg = ReplicaConfig.from_dict({"filter": {"rules": [f"{fresh_db}.*"]}})
    sink = create_sink(
        tansu.sink_uri(topic, "protocol=canal-json&enable-tidb-extension=true&partition-num=3"),
        cfg,
        "snap-sink",
    )
    sink.check()
    assert direct_groups(sink) == "parallel"
    snap, report = _run(spark, mariadb, fresh_db, tmp_path, sink)
    infos = {t.table: t for t in snap.tables()}
    c = Consumer({"bootstrap.servers": tansu.bootstrap, "group.id": topic, "enable.partition.eof": True})
    got: dict[str, Counter[str]] = {}
    watermarks = 0
    try:
        parts = list(c.list_topics(topic, timeout=30).topics[topic].partitions)
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        at_end: set[int] = set()
        while len(at_end) < len(parts):
            for m in c.consume(num_messages=1000, timeout=1.0):
                if m.error() is not None:
                    assert m.error().code() == KafkaError._PARTITION_EOF
                    at_end.add(int(m.partition() or 0))
                    continue
                msg = decode_canal_json(m.value())
                if msg.table is None or not msg.data:
                    watermarks += 1
                    continue
                row = canal_message_to_row_change(msg, infos[msg.table])
                assert row.op == "I" and row.commit_ts == snap.handover.ts
                got.setdefault(msg.table, Counter())[cs.key_token(row.after)] += 1
    finally:
        c.close()
        sink.close()
    assert got == at_s
    assert report["rows_written"] == sum(sum(v.values()) for v in at_s.values())
    assert watermarks >= len(parts)  # the batch's commit broadcast the watermark


def test_mysql_gets_the_state_at_s_one_task_per_route_group(
    spark: Any,
    mariadb: LocalMariaDB,
    fresh_db: str,
    downstream: LocalMariaDB,
    tmp_path: Path,
) -> None:
    from sparkcdc.sink import create_sink

    _fill(mariadb, fresh_db)
    at_s = _state(mariadb, fresh_db, TABLES)
    downstream.execute(f"DROP DATABASE IF EXISTS `{fresh_db}`", f"CREATE DATABASE `{fresh_db}`")
    conn = mariadb.connect(fresh_db)
    try:
        with conn.cursor() as cur:
            ddl = []
            for t in TABLES:
                cur.execute(f"SHOW CREATE TABLE `{t}`")
                ddl.append(cur.fetchone()[1])
    finally:
        conn.close()
    downstream.execute(*(d.replace("CREATE TABLE ", f"CREATE TABLE `{fresh_db}`.", 1) for d in ddl))
    cfg = ReplicaConfig.from_dict({"filter": {"rules": [f"{fresh_db}.*"]}})
    sink = create_sink(downstream.uri.rstrip("/") + "/?worker-count=4", cfg, "snap-sink")
    sink.check()
    assert direct_groups(sink) == "routes"
    try:
        _snap, report = _run(spark, mariadb, fresh_db, tmp_path, sink)
    finally:
        sink.close()
    assert _state(downstream, fresh_db, TABLES) == at_s
    assert report["rows_written"] == sum(sum(v.values()) for v in at_s.values())
