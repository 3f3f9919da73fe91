"""MariaDB binlog → avro Kafka sink → Tansu → ``sparkcdc consumer`` → a downstream MariaDB equal to the upstream."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from sparkcdc.capture.reader import RowReader, TableShapes
from sparkcdc.capture.start import head_offset
from sparkcdc.cli.main import main as cli_main
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.consumer.kafka import run_kafka_consumer
from sparkcdc.errors import DecodeError
from sparkcdc.model import RowChange, TableInfo
from sparkcdc.registry.local import LocalSchemaRegistry
from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.tansu import LocalTansu
from sparkcdc.sink import create_sink
from sparkcdc.sink.kafka.producer import close_all_producers
from tests.integration.capture.helpers import upstream
from tests.integration.capture.test_types import COLUMNS, ROWS, _select_exprs
from tests.integration.kafka.conftest import run_batch

pytestmark = pytest.mark.integration

TABLE = "all-types"
"""A name Avro must sanitise (record name ``all_types``): the consumer maps it back."""


@pytest.fixture(scope="module")
def broker() -> Iterator[LocalTansu]:
    with LocalTansu() as b:
        yield b
    close_all_producers(1)


@pytest.fixture(scope="module")
def downstream() -> Iterator[LocalMariaDB]:
    with LocalMariaDB(binlog=False) as db:
        yield db


def _mysql_uri(db: LocalMariaDB) -> str:
    return f"mysql://root:@127.0.0.1:{db.port}/"


def _select(db: LocalMariaDB, schema: str) -> list[tuple[Any, ...]]:
    conn = db.connect(schema)
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            cur.execute(f"SELECT id, {_select_exprs()} FROM `{TABLE}` ORDER BY id")
            return list(cur.fetchall())
    finally:
        conn.close()


def _rewind_group(broker: LocalTansu, topic: str, group: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        c.commit(offsets=[TopicPartition(topic, p, 0) for p in range(3)], asynchronous=False)
        assert all(
            tp.offset == 0 for tp in c.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
        )
    finally:
        c.close()


def _capture(mariadb: LocalMariaDB, db: str) -> tuple[list[list[RowChange]], TableInfo]:
    """Three batches of upstream changes: inserts; update, key change, delete; delete + re-insert + insert."""
    cols = ", ".join(f"`{n}` {t}" for n, t in COLUMNS)
    mariadb.execute(f"CREATE TABLE `{db}`.`{TABLE}` (id INT PRIMARY KEY, {cols})")
    up = upstream(mariadb)
    start = head_offset(up)
    conn = mariadb.connect(db)
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00', sql_mode = ''")
        for i, row in enumerate(ROWS, start=1):
            cur.execute(f"INSERT INTO `{TABLE}` VALUES ({i}, {', '.join(row)})")
        cur.execute(f"UPDATE `{TABLE}` SET i = 7, vc = 'changed' WHERE id = 1")
        cur.execute(f"UPDATE `{TABLE}` SET id = 10 WHERE id = 2")  # key change: tombstone + "c"
        cur.execute(f"DELETE FROM `{TABLE}` WHERE id = 3")
        cur.execute(f"DELETE FROM `{TABLE}` WHERE id = 1")
        cur.execute(f"INSERT INTO `{TABLE}` VALUES (1, {', '.join(ROWS[1])})")
        cur.execute(f"INSERT INTO `{TABLE}` VALUES (20, {', '.join(ROWS[0])})")
    conn.close()
    shapes = TableShapes()
    rows = [
        ev
        for ev in RowReader(up, start, head_offset(up), shapes=shapes, time_zone="UTC").events()
        if isinstance(ev, RowChange) and ev.schema == db
    ]
    assert [r.op for r in rows] == ["I", "I", "I", "U", "U", "D", "D", "I", "I"]
    return [rows[:3], rows[3:6], rows[6:]], shapes.last[(db, TABLE)]


@pytest.mark.parametrize(
    ("decimal", "bigint", "extension"), [("precise", "long", True), ("string", "string", False)]
)
def test_consumer_replays_avro_into_mysql(
    mariadb: LocalMariaDB,
    fresh_db: str,
    broker: LocalTansu,
    registry: LocalSchemaRegistry,
    downstream: LocalMariaDB,
    capsys: pytest.CaptureFixture[str],
    decimal: str,
    bigint: str,
    extension: bool,
) -> None:
    batches, table = _capture(mariadb, fresh_db)
    create = mariadb.query(f"SHOW CREATE TABLE `{fresh_db}`.`{TABLE}`")[0][1]
    downstream.execute(f"DROP DATABASE IF EXISTS `{fresh_db}`", f"CREATE DATABASE `{fresh_db}`")
    downstream.execute(create, database=fresh_db)

    topic = "avro-" + uuid.uuid4().hex[:8]
    options = (
        f"schema-registry={registry.url}&enable-tidb-extension={str(extension).lower()}"
        f"&avro-decimal-handling-mode={decimal}&avro-bigint-unsigned-handling-mode={bigint}"
    )
    sink = create_sink(broker.sink_uri(topic, "protocol=avro&" + options), ReplicaConfig(), "cf")
    sink.check()
    for n, batch in enumerate(batches, start=1):
        run_batch(sink, [(r, table) for r in batch], n, batch[-1].commit_ts)
    # the last batch is re-sent (at-least-once after a failed commit): delete + re-insert of id 1 again
    run_batch(sink, [(r, table) for r in batches[-1]], len(batches), batches[-1][-1].commit_ts)
    sink.close()

    expected = _select(mariadb, fresh_db)
    assert [r[0] for r in expected] == [1, 10, 20]
    up = broker.sink_uri(topic, "protocol=flat-avro&" + options)
    rc = cli_main(["consumer", "--upstream-uri", up, "--downstream-uri", _mysql_uri(downstream), "--once"])
    assert rc == 0
    assert "applied" in capsys.readouterr().out
    assert _select(downstream, fresh_db) == expected

    # the same consumer group again, its Kafka offsets lost (as when the offset commit fails after the
    # downstream commit): the downstream progress table gives the offsets, nothing is read again
    _rewind_group(broker, topic, f"sparkcdc-consumer-{topic}")
    again = run_kafka_consumer(up, _mysql_uri(downstream), once=True, timeout=60)
    assert again.rows == 0 and again.messages == 0
    assert _select(downstream, fresh_db) == expected

    # a new group replays the whole topic: REPLACE / DELETE by key leave the same table
    fresh = run_kafka_consumer(up + "&group-id=replay-all", _mysql_uri(downstream), once=True, timeout=60)
    # 9 changes (the key change is 2 messages) + the 3 re-sent ones
    assert fresh.messages == 13
    if extension:
        # the re-sent batch is recognised by its commit_ts falling back: only its last row is applied again
        assert fresh.rows_dropped == 2 and fresh.rows == 11
    else:
        assert fresh.rows == 13
    assert _select(downstream, fresh_db) == expected


def test_missing_downstream_table_is_reported(
    broker: LocalTansu, registry: LocalSchemaRegistry, downstream: LocalMariaDB
) -> None:
    from sparkcdc.model import ColumnInfo, IndexInfo

    schema = "nodb" + uuid.uuid4().hex[:6]
    info = TableInfo(
        schema,
        "t",
        (ColumnInfo("id", "int", nullable=False), ColumnInfo("v", "varchar", length=8)),
        indexes=(IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
        version=1,
    )
    topic = "avro-" + uuid.uuid4().hex[:8]
    uri = broker.sink_uri(topic, f"protocol=avro&schema-registry={registry.url}")
    sink = create_sink(uri, ReplicaConfig(), "cf")
    sink.check()
    run_batch(sink, [(RowChange("I", schema, "t", 1, 1 << 20, None, (1, "x")), info)], 1, 1 << 20)
    sink.close()
    with pytest.raises(
        DecodeError, match=rf"downstream table {schema}\.t .* create the table downstream first"
    ):
        run_kafka_consumer(uri, _mysql_uri(downstream), once=True, timeout=30)
