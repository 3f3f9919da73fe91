"""Kafka sink → Tansu → Kafka consumer → a real MariaDB: the downstream ends equal to the changes sent."""

from __future__ import annotations

import dataclasses
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.consumer.kafka import run_kafka_consumer
from sparkcdc.errors import DecodeError
from sparkcdc.model import ColumnInfo, DDLEvent, DDLType, RowChange, TableInfo, compose_ts
from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.tansu import LocalTansu
from sparkcdc.sink.kafka import KafkaSink
from tests.integration.kafka.conftest import person_table, run_batch

pytestmark = pytest.mark.integration

CREATE_A = "CREATE TABLE a (id INT PRIMARY KEY, name VARCHAR(64), note TEXT, price DECIMAL(10,2))"
CREATE_B = "CREATE TABLE b (id INT PRIMARY KEY, name VARCHAR(64), note TEXT, price DECIMAL(10,2))"
ALTER_A = "ALTER TABLE a ADD COLUMN qty INT"

_clock = [0]


def next_ts() -> int:
    _clock[0] += 1
    return compose_ts(1_700_000_000_000 + _clock[0] * 10, 0)


def downstream(db: LocalMariaDB) -> str:
    return f"mysql://root:@127.0.0.1:{db.port}/"


def rows_of(db: LocalMariaDB, schema: str, table: str) -> list[tuple[Any, ...]]:
    return db.query(f"SELECT * FROM `{schema}`.`{table}` ORDER BY id")


class Model:
    """Sends changes through the sink and tracks what the downstream must hold."""

    def __init__(self, sink: KafkaSink, schema: str) -> None:
        self.sink = sink
        self.schema = schema
        self.tables: dict[str, TableInfo] = {}
        self.state: dict[str, dict[int, tuple[Any, ...]]] = {}
        self.batch = 0
        self.items: list[tuple[RowChange, TableInfo]] = []

    def ddl(self, table: str, query: str, info: TableInfo, ddl_type: DDLType) -> None:
        ts = next_ts()
        self.sink.apply_ddl(DDLEvent(query, self.schema, table, ddl_type, ts, ts))
        self.tables[table] = info.with_version(ts)
        self.state.setdefault(table, {})
        if ddl_type == DDLType.ALTER_TABLE:
            self.state[table] = {k: (*v, None) for k, v in self.state[table].items()}

    def txn(self, *changes: tuple[str, str, tuple[Any, ...] | None, tuple[Any, ...] | None]) -> None:
        ts = next_ts()
        for seq, (table, op, before, after) in enumerate(changes):
            info = self.tables[table]
            self.items.append((RowChange(op, self.schema, table, info.version, ts, before, after, seq), info))
            st = self.state[table]
            if before is not None:
                st.pop(before[0], None)
            if after is not None:
                st[after[0]] = after

    def flush(self) -> int:
        self.batch += 1
        checkpoint = next_ts()
        run_batch(self.sink, self.items, self.batch, checkpoint)
        self.items = []
        return checkpoint


def replay_once(kafka: LocalTansu, topic: str, mariadb: LocalMariaDB) -> Any:
    """The Kafka consumer over everything the topic holds, into ``mariadb``."""
    return run_kafka_consumer(
        kafka.sink_uri(topic, "protocol=canal-json"),
        downstream(mariadb),
        ReplicaConfig(),
        once=True,
        timeout=60,
    )


def norm(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(Decimal(v).quantize(Decimal("0.01")) if isinstance(v, (Decimal, float)) else v for v in row)


def check_equal(mariadb: LocalMariaDB, model: Model) -> None:
    for table, st in model.state.items():
        expected = [norm(st[k]) for k in sorted(st)]
        assert [norm(r) for r in rows_of(mariadb, model.schema, table)] == expected, table


@pytest.fixture()
def kafka() -> Any:
    with LocalTansu() as broker:
        yield broker


def test_replay_into_mariadb_is_complete_ordered_and_idempotent(
    kafka: LocalTansu, mariadb: LocalMariaDB, fresh_db: str
) -> None:
    topic = "replay"
    toml = f'[sink]\ndispatchers = [{{matcher = ["{fresh_db}.a"], partition = "ts"}}]\n'
    query = "protocol=canal-json&enable-tidb-extension=true&partition-num=3"
    sink = KafkaSink(kafka.sink_uri(topic, query), ReplicaConfig.from_toml(toml), "cf")
    sink.check()
    m = Model(sink, fresh_db)
    a, b = person_table(fresh_db, "a"), person_table(fresh_db, "b")
    m.ddl("a", CREATE_A, a, DDLType.CREATE_TABLE)
    m.ddl("b", CREATE_B, b, DDLType.CREATE_TABLE)
    for i in range(1, 31):
        m.txn(
            ("a", "I", None, (i, f"a{i}", "x<&>\n", Decimal("1.25"))),
            ("b", "I", None, (i, f"b{i}", None, None)),
        )
    m.flush()
    # the same key updated in consecutive transactions lands on different partitions (ts dispatch)
    for k in range(3):
        m.txn(
            (
                "a",
                "U",
                (5, "a5" if k == 0 else f"v{k - 1}", "x<&>\n", Decimal("1.25")),
                (5, f"v{k}", "x<&>\n", Decimal("1.25")),
            )
        )
    m.txn(("a", "D", (6, "a6", "x<&>\n", Decimal("1.25")), None), ("b", "D", (7, "b7", None, None), None))
    # a primary-key change: split into DELETE + INSERT by the sink
    m.txn(("b", "U", (8, "b8", None, None), (108, "b8", "moved", Decimal("9.99"))))
    m.flush()
    a2 = dataclasses.replace(a, columns=(*a.columns, ColumnInfo("qty", "int", length=11)), _pos={})
    m.ddl("a", ALTER_A, a2, DDLType.ALTER_TABLE)
    for i in range(40, 45):
        m.txn(("a", "I", None, (i, f"a{i}", None, Decimal("0.50"), i * 2)))
    last_items = list(m.items)
    m.flush()

    up = kafka.sink_uri(topic, "protocol=canal-json")
    stats = run_kafka_consumer(up, downstream(mariadb), ReplicaConfig(), once=True, timeout=60)
    assert stats.ddls == 3 and stats.rows == 30 * 2 + 3 + 2 + 2 + 5
    check_equal(mariadb, m)

    # a second run finds nothing new
    again = run_kafka_consumer(up, downstream(mariadb), ReplicaConfig(), once=True, timeout=60)
    assert again.rows == 0 and again.ddls == 0
    check_equal(mariadb, m)

    # a retried batch re-sends its rows (at-least-once), then new changes follow
    run_batch(sink, last_items, m.batch, next_ts())
    m.txn(("a", "U", (40, "a40", None, Decimal("0.50"), 80), (40, "late", None, Decimal("0.50"), 81)))
    m.flush()
    third = run_kafka_consumer(up, downstream(mariadb), ReplicaConfig(), once=True, timeout=60)
    assert third.rows == 1 and third.rows_dropped == len(last_items)
    check_equal(mariadb, m)


def test_once_returns_while_the_changefeed_keeps_sending_watermarks(
    kafka: LocalTansu, mariadb: LocalMariaDB, fresh_db: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A live changefeed writes watermarks to every partition about every second, so a fetch is rarely
    empty and librdkafka rarely signals a partition's end: --once stops when each partition's position
    reached the end its latest fetch reported, not at its timeout. Watermarks come every 0.1 s here,
    more often than the consumer's fetch wait (0.5 s), so no fetch comes back empty."""
    topic = "live"
    query = "protocol=canal-json&enable-tidb-extension=true&partition-num=3"
    sink = KafkaSink(kafka.sink_uri(topic, query), ReplicaConfig(), "cf")
    sink.check()
    m = Model(sink, fresh_db)
    m.ddl("a", CREATE_A, person_table(fresh_db, "a"), DDLType.CREATE_TABLE)
    for i in range(1, 21):
        m.txn(("a", "I", None, (i, f"a{i}", None, None)))
    m.flush()
    stop = threading.Event()

    def idle_batches() -> None:
        while not stop.is_set():
            m.flush()  # an empty batch: its commit broadcasts a watermark to each partition
            stop.wait(0.1)

    feeder = threading.Thread(target=idle_batches)
    feeder.start()
    try:
        t0 = time.monotonic()
        stats = run_kafka_consumer(
            kafka.sink_uri(topic, "protocol=canal-json"),
            downstream(mariadb),
            ReplicaConfig(),
            once=True,
            timeout=60,
        )
        took = time.monotonic() - t0
    finally:
        stop.set()
        feeder.join(timeout=30)
    assert stats.rows == 20 and stats.messages > 20
    assert "stops at its timeout" not in caplog.text, f"--once ran to its timeout ({took:.1f}s)"
    assert took < 20, f"--once took {took:.1f}s against a live topic (its timeout is 60s)"
    check_equal(mariadb, m)


def test_claim_check_rows_are_restored_from_storage(
    kafka: LocalTansu, mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    topic = "claims"
    toml = (
        "[sink.kafka-config.large-message-handle]\n"
        'large-message-handle-option = "claim-check"\n'
        f'claim-check-storage-uri = "file://{tmp_path}"\n'
    )
    config = ReplicaConfig.from_toml(toml)
    query = "protocol=canal-json&enable-tidb-extension=true&partition-num=2&max-message-bytes=2048"
    sink = KafkaSink(kafka.sink_uri(topic, query), config, "cf")
    sink.check()
    m = Model(sink, fresh_db)
    m.ddl("a", CREATE_A, person_table(fresh_db, "a"), DDLType.CREATE_TABLE)
    m.txn(
        ("a", "I", None, (1, "small", "s", None)), ("a", "I", None, (2, "big", "é<>" * 2000, Decimal("3.00")))
    )
    m.flush()
    assert len(list(tmp_path.iterdir())) == 1
    up = kafka.sink_uri(topic, "protocol=canal-json")
    stats = run_kafka_consumer(up, downstream(mariadb), config, once=True, timeout=60)
    assert stats.claim_checks == 1 and stats.rows == 2
    check_equal(mariadb, m)


def test_handle_key_only_insert_cannot_be_replayed(
    kafka: LocalTansu, mariadb: LocalMariaDB, fresh_db: str
) -> None:
    topic = "keyonly"
    config = ReplicaConfig.from_toml(
        '[sink.kafka-config.large-message-handle]\nlarge-message-handle-option = "handle-key-only"\n'
    )
    query = "protocol=canal-json&enable-tidb-extension=true&partition-num=1&max-message-bytes=1024"
    sink = KafkaSink(kafka.sink_uri(topic, query), config, "cf")
    sink.check()
    m = Model(sink, fresh_db)
    m.ddl("a", CREATE_A, person_table(fresh_db, "a"), DDLType.CREATE_TABLE)
    m.txn(("a", "I", None, (1, "big", "z" * 3000, None)))
    m.flush()
    with pytest.raises(DecodeError, match="carries only its handle key"):
        run_kafka_consumer(
            kafka.sink_uri(topic, "protocol=canal-json"), downstream(mariadb), config, once=True, timeout=60
        )


def test_sparkcdc_consumer_command_dispatches_kafka(
    kafka: LocalTansu, mariadb: LocalMariaDB, fresh_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from sparkcdc.cli.main import main

    topic = "cli"
    sink = KafkaSink(
        kafka.sink_uri(topic, "protocol=canal-json&enable-tidb-extension=true"), ReplicaConfig(), "cf"
    )
    sink.check()
    m = Model(sink, fresh_db)
    m.ddl("b", CREATE_B, person_table(fresh_db, "b"), DDLType.CREATE_TABLE)
    m.txn(*[("b", "I", None, (i, f"n{i}", None, Decimal("2.00"))) for i in range(1, 4)])
    m.flush()
    rc = main(
        [
            "consumer",
            "--upstream-uri",
            kafka.sink_uri(topic, "protocol=canal-json&group-id=cli-test"),
            "--downstream-uri",
            downstream(mariadb),
            "--once",
        ]
    )
    assert rc == 0
    assert "applied 1 DDL and 3 rows" in capsys.readouterr().out
    check_equal(mariadb, m)


def test_a_resent_batch_is_dropped_by_commit_ts_fallback(
    kafka: LocalTansu, mariadb: LocalMariaDB, fresh_db: str
) -> None:
    topic = "resent"
    query = "protocol=canal-json&enable-tidb-extension=true&partition-num=1"
    sink = KafkaSink(kafka.sink_uri(topic, query), ReplicaConfig(), "cf")
    sink.check()
    m = Model(sink, fresh_db)
    m.ddl("a", CREATE_A, person_table(fresh_db, "a"), DDLType.CREATE_TABLE)
    m.flush()
    for i in range(1, 4):
        m.txn(
            ("a", "I", None, (i, f"n{i}", None, None)),
            ("a", "U", (i, f"n{i}", None, None), (i, f"u{i}", None, None)),
        )
    items = list(m.items)
    # the first attempt reaches Kafka but its driver dies before the watermark; the retry re-sends it all
    run_batch(sink, items, 2, 0, commit=False)
    m.flush()
    stats = replay_once(kafka, topic, mariadb)
    # T1, T2 re-sent are below the partition's largest commit_ts; T3's copy cannot be told apart
    assert stats.rows_dropped == 4 and stats.rows == 8
    check_equal(mariadb, m)


def test_a_batch_resent_after_its_watermark_is_dropped_whole(
    kafka: LocalTansu, mariadb: LocalMariaDB, fresh_db: str
) -> None:
    """A batch run again after a restart, whose first run's watermark the partition already carries:
    every row of it is a replay, its last transaction too (that one is not below the largest commit_ts)."""
    topic = "resent-after-mark"
    query = "protocol=canal-json&enable-tidb-extension=true&partition-num=1"
    sink = KafkaSink(kafka.sink_uri(topic, query), ReplicaConfig(), "cf")
    sink.check()
    m = Model(sink, fresh_db)
    m.ddl("a", CREATE_A, person_table(fresh_db, "a"), DDLType.CREATE_TABLE)
    m.flush()
    for i in range(1, 4):
        m.txn(("a", "I", None, (i, f"n{i}", None, None)))
    items = list(m.items)
    checkpoint = m.flush()  # the rows, then the watermark at the batch's checkpoint
    resent = KafkaSink(kafka.sink_uri(topic, query), ReplicaConfig(), "cf")  # the restarted run's sink
    resent.check()
    run_batch(resent, items, 1, checkpoint)
    stats = replay_once(kafka, topic, mariadb)
    assert stats.rows == 3 and stats.rows_dropped == 3, stats
    check_equal(mariadb, m)


def keyless_table(schema: str, table: str) -> TableInfo:
    return TableInfo(
        schema=schema,
        table=table,
        columns=(ColumnInfo("a", "int", length=11), ColumnInfo("b", "varchar", length=64, charset="utf8mb4")),
        version=1,
    )


def test_a_resent_transaction_of_a_table_without_a_key_is_applied_once(
    kafka: LocalTansu, mariadb: LocalMariaDB, fresh_db: str
) -> None:
    """Rows of a table without a handle key cannot be applied twice harmlessly. A batch re-sent
    after a crash before its watermark repeats them with the same commit_ts, and equal rows in one
    transaction are legitimate: the ``sparkcdc-row-seq`` header tells a copy from a new row."""
    topic = "resent-keyless"
    query = "protocol=canal-json&enable-tidb-extension=true&partition-num=2"
    sink = KafkaSink(kafka.sink_uri(topic, query), ReplicaConfig(), "cf")
    sink.check()
    m = Model(sink, fresh_db)
    m.ddl("k", "CREATE TABLE k (a INT, b VARCHAR(64))", keyless_table(fresh_db, "k"), DDLType.CREATE_TABLE)
    m.flush()
    # one transaction with two equal rows; the first run sends two of its three rows and dies
    m.txn(("k", "I", None, (1, "x")), ("k", "I", None, (1, "x")), ("k", "I", None, (2, "y")))
    run_batch(sink, m.items[:2], 2, 0, commit=False)
    m.flush()
    # two transactions sent whole, the driver dies before the watermark, and the batch is sent again
    m.txn(("k", "I", None, (3, "z")), ("k", "D", (1, "x"), None))
    m.txn(("k", "U", (2, "y"), (2, "w")), ("k", "I", None, (4, "v")))
    run_batch(sink, list(m.items), 4, 0, commit=False)
    m.flush()
    stats = replay_once(kafka, topic, mariadb)
    got = sorted(mariadb.query(f"SELECT a, b FROM `{fresh_db}`.k"))
    assert got == [(1, "x"), (2, "w"), (3, "z"), (4, "v")], (got, stats)
    assert stats.rows_dropped == 6, stats
