"""Storage sink → files (local dir or real S3) → storage consumer → real MariaDB, compared with a reference.

Rows are written through the sink's writer API (no Spark): the same changes are run as SQL in a
reference database and as RowChange objects through the sink, then the consumer replays the files
into a third database and the two tables must be equal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.cli.main import main as cli_main
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.consumer.storage import StorageConsumer
from sparkcdc.model import ColumnInfo, DDLEvent, DDLType, IndexInfo, RowChange, TableInfo
from sparkcdc.model.ts import compose_ts
from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.s3 import LocalS3
from sparkcdc.sink import create_sink
from sparkcdc.sink.base import Sink, WriterContext

pytestmark = pytest.mark.integration

T1_COLUMNS = (
    ColumnInfo("id", "int", nullable=False, length=11),
    ColumnInfo("name", "varchar", length=32, charset="utf8mb4"),
    ColumnInfo("price", "decimal", precision=10, scale=2),
    ColumnInfo("dt", "datetime", fsp=3),
    ColumnInfo("bin", "varbinary", length=8),
    ColumnInfo("e", "enum", elements=("a", "b", "c")),
    ColumnInfo("s", "set", elements=("x", "y")),
    ColumnInfo("b", "bit", length=8),
    ColumnInfo("j", "json"),
    ColumnInfo("f", "float"),
    ColumnInfo("c", "text", charset="utf8mb4"),
    ColumnInfo("d", "date"),
    ColumnInfo("tm", "time"),
    ColumnInfo("y", "year", length=4),
    ColumnInfo("u", "bigint", unsigned=True, length=20),
)
T1_DDL = (
    "CREATE TABLE t1 (id INT PRIMARY KEY, name VARCHAR(32), price DECIMAL(10,2), dt DATETIME(3), "
    "bin VARBINARY(8), e ENUM('a','b','c'), s SET('x','y'), b BIT(8), j JSON, f FLOAT, c TEXT, d DATE, "
    "tm TIME, y YEAR, u BIGINT UNSIGNED)"
)
T0_COLUMNS = (ColumnInfo("k", "varchar", length=16, nullable=False), ColumnInfo("n", "bigint", length=20))
T0_DDL = "CREATE TABLE t0 (k VARCHAR(16) PRIMARY KEY, n BIGINT)"


def t1_row(i: int, name: str = "n") -> tuple[Any, ...]:
    return (
        i, f"{name}{i} \"q\",<&>\n", Decimal(f"{i}.50"), f"2024-01-0{1 + i % 9} 03:04:05.678",
        bytes([i % 256, 0x41, 0x3C, 0x00]), "abc"[i % 3], ("x", "y", "x,y")[i % 3], i % 256,
        '{"k": [1, 2]}', 1.5 * i, None if i % 2 else "text ü", "2024-02-03", "12:34:56", 2000 + i,
        18446744073709551615 - i,
    )  # fmt: skip


class Workload:
    """Runs each change as SQL upstream (the reference) and records it as a RowChange for the sink."""

    def __init__(self, db: LocalMariaDB, ref: str, dst: str) -> None:
        self.db, self.ref, self.dst = db, ref, dst
        self.ts = compose_ts(1_700_000_000_000)
        self.t1 = TableInfo(dst, "t1", T1_COLUMNS, (IndexInfo("PRIMARY", ("id",), True, True),))
        self.t0 = TableInfo(dst, "t0", T0_COLUMNS, (IndexInfo("PRIMARY", ("k",), True, True),))
        self.state: dict[tuple[str, Any], tuple[Any, ...]] = {}

    def next_ts(self) -> int:
        self.ts += 1 << 18
        return self.ts

    def sql(self, sql: str, args: Any = None) -> None:
        conn = self.db.connect(self.ref)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
        finally:
            conn.close()

    def ddl(self, sql: str, table: str, kind: DDLType, info: TableInfo | None) -> DDLEvent:
        self.sql(sql)
        ts = self.next_ts()
        if info is not None:
            info = info.with_version(ts)
            setattr(self, table, info)
        return DDLEvent(sql, self.dst, table, kind, ts, ts, info)

    def insert(self, table: str, row: tuple[Any, ...], ts: int, seq: int = 0) -> RowChange:
        info: TableInfo = getattr(self, table)
        cols = ", ".join(f"`{c}`" for c in info.column_names)
        self.sql(f"INSERT INTO {table} ({cols}) VALUES ({', '.join(['%s'] * len(row))})", row)
        self.state[(table, row[0])] = row
        return RowChange("I", self.dst, table, info.version, ts, None, row, seq)

    def update(self, table: str, key: Any, new: tuple[Any, ...], ts: int, seq: int = 0) -> RowChange:
        info: TableInfo = getattr(self, table)
        old = self.state.pop((table, key))
        sets = ", ".join(f"`{c}`=%s" for c in info.column_names)
        self.sql(f"UPDATE {table} SET {sets} WHERE `{info.column_names[0]}`=%s", (*new, key))
        self.state[(table, new[0])] = new
        return RowChange("U", self.dst, table, info.version, ts, old, new, seq)

    def delete(self, table: str, key: Any, ts: int, seq: int = 0) -> RowChange:
        info: TableInfo = getattr(self, table)
        old = self.state.pop((table, key))
        self.sql(f"DELETE FROM {table} WHERE `{info.column_names[0]}`=%s", (key,))
        return RowChange("D", self.dst, table, info.version, ts, old, None, seq)


def write(sink: Sink, rows: list[RowChange], w: Workload, batch: int) -> dict[str, Any]:
    groups: dict[int, list[RowChange]] = {}
    for r in rows:
        groups.setdefault(sink.route(r, getattr(w, r.table)), []).append(r)
    files = []
    for gid, group in groups.items():
        writer = sink.open_writer(WriterContext("cf", batch, gid))
        for r in sorted(group, key=lambda r: (r.commit_ts, r.seq)):
            info: TableInfo = getattr(w, r.table)
            writer.write(r, info if info.version == r.table_version else info.with_version(r.table_version))
        files.extend(writer.close()["files"])
    return {"files": files}


def table_rows(db: LocalMariaDB, schema: str, table: str) -> list[tuple[Any, ...]]:
    return db.query(f"SELECT * FROM `{schema}`.`{table}` ORDER BY 1")


@pytest.fixture(scope="module")
def s3() -> Iterator[LocalS3]:
    with LocalS3() as server:
        server.create_bucket("cdc")
        yield server


@pytest.fixture()
def dst(mariadb: LocalMariaDB, fresh_db: str) -> Iterator[str]:
    name = fresh_db + "_dst"
    mariadb.execute(f"DROP DATABASE IF EXISTS `{name}`")
    yield name
    mariadb.execute(f"DROP DATABASE IF EXISTS `{name}`", "DROP DATABASE IF EXISTS `sparkcdc_consumer`")


CASES = {
    "csv-file": ("file", "csv", "[sink]\nprotocol = 'csv'\n[sink.csv]\ninclude-commit-ts = true\n"),
    "canal-json-file": ("file", "canal-json", "[sink]\nprotocol = 'canal-json'\ndate-separator = 'none'\n"),
    "csv-s3": (
        "s3",
        "csv",
        "[sink]\nprotocol = 'csv'\nfile-index-digit = 6\n[sink.csv]\ninclude-commit-ts = true\n"
        "binary-encoding-method = 'hex'\nquote = ''\n",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_round_trip_with_ddl_replay_and_checkpoint(
    case: str, mariadb: LocalMariaDB, fresh_db: str, dst: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    backend, protocol, toml = CASES[case]
    cfg = ReplicaConfig.from_toml(toml)
    if backend == "s3":
        s3: LocalS3 = request.getfixturevalue("s3")
        uri = s3.sink_uri(f"cdc/{fresh_db}", protocol=protocol, **{"worker-count": "2"})
    else:
        uri = f"file://{tmp_path}/out?protocol={protocol}&worker-count=2"
    if protocol == "canal-json":
        uri += "&enable-tidb-extension=true"
    sink = create_sink(uri, cfg, "cf")
    sink.check()
    downstream = f"mysql://root:@127.0.0.1:{mariadb.port}/"
    w = Workload(mariadb, fresh_db, dst)

    # t0 existed before the changefeed: no CREATE DDL, only rows (the consumer creates it downstream).
    w.sql(T0_DDL)
    w.t0 = w.t0.with_version(w.next_ts())
    sink.apply_ddl(DDLEvent(f"CREATE DATABASE `{dst}`", dst, "", DDLType.CREATE_SCHEMA, w.next_ts(), w.ts))
    sink.apply_ddl(w.ddl(T1_DDL, "t1", DDLType.CREATE_TABLE, w.t1))

    ts = w.next_ts()
    batch1 = [w.insert("t1", t1_row(i), ts, i) for i in range(1, 6)]
    ts = w.next_ts()
    batch1 += [w.insert("t0", (f"k{i}", i), ts, i) for i in range(3)]
    write(sink, batch1, w, 1)
    ts2 = w.next_ts()
    batch2 = [
        w.update("t1", 1, t1_row(1, "upd"), ts2, 0),
        w.update("t1", 2, t1_row(20, "pk"), ts2, 1),  # primary key 2 → 20
        w.delete("t1", 3, ts2, 2),
        w.update("t0", "k1", ("k1", 100), ts2, 3),
    ]
    write(sink, batch2, w, 2)
    sink.flush_metadata(ts2)

    consumer = StorageConsumer(uri, downstream, cfg)
    try:
        s = consumer.run_once()
        assert (s.checkpoint_ts, s.rows, s.rows_dropped, s.rows_pending) == (ts2, len(batch1) + 4 + 1, 0, 0)
        assert s.tables_created == 1 and s.ddls == 2
        assert table_rows(mariadb, dst, "t1") == table_rows(mariadb, fresh_db, "t1")
        assert table_rows(mariadb, dst, "t0") == table_rows(mariadb, fresh_db, "t0")

        # The batch is retried upstream (at-least-once): the same rows land in new files again,
        # then the table is altered and more rows come; batch 4 is beyond the checkpoint.
        write(sink, batch2, w, 2)
        alter = w.ddl(
            "ALTER TABLE t1 ADD COLUMN extra INT",
            "t1",
            DDLType.ALTER_TABLE,
            dataclasses.replace(w.t1, columns=(*T1_COLUMNS, ColumnInfo("extra", "int", length=11))),
        )
        sink.apply_ddl(alter)
        ts3 = w.next_ts()
        w.state = {k: (*v, None) if k[0] == "t1" else v for k, v in w.state.items()}
        batch3 = [
            w.insert("t1", (*t1_row(7), 77), ts3, 0),
            w.update("t1", 1, (*t1_row(1, "again"), 11), ts3, 1),
        ]
        write(sink, batch3, w, 3)
        sink.flush_metadata(ts3)
        ts4 = w.next_ts()
        batch4 = [w.delete("t1", 4, ts4), w.insert("t0", ("late", 9), ts4, 1)]
        write(sink, batch4, w, 4)

        s = consumer.run_once()
        assert (s.rows, s.rows_dropped, s.ddls) == (
            2,
            5,
            1,
        )  # replayed batch 2 (5 rows: a split update) dropped
        assert s.rows_pending == 2
        assert (
            len(table_rows(mariadb, dst, "t1")) == len(table_rows(mariadb, fresh_db, "t1")) + 1
        )  # row 4 waits
        sink.flush_metadata(ts4)
    finally:
        consumer.close()

    # A new consumer (a re-run) continues from the progress table; then nothing is left to do.
    args = [
        "consumer",
        "--upstream-uri",
        uri,
        "--downstream-uri",
        downstream,
        "--once",
        "--flush-interval",
        "1s",
    ]
    config_file = tmp_path / "cf.toml"
    config_file.write_text(toml)
    assert cli_main([*args, "--config", str(config_file)]) == 0
    assert table_rows(mariadb, dst, "t1") == table_rows(mariadb, fresh_db, "t1")
    assert table_rows(mariadb, dst, "t0") == table_rows(mariadb, fresh_db, "t0")
    with StorageConsumer(uri, downstream, cfg) as again:
        s = again.run_once()
        assert (s.rows, s.ddls, s.files, s.rows_pending) == (0, 0, 0, 0)
    assert table_rows(mariadb, dst, "t1") == table_rows(mariadb, fresh_db, "t1")


def test_csv_without_commit_ts_converges_in_safe_mode(
    mariadb: LocalMariaDB, fresh_db: str, dst: str, tmp_path: Path
) -> None:
    """Default CSV has no commit_ts column: files apply whole, replays converge through safe mode."""
    cfg = ReplicaConfig.from_toml("[sink]\nprotocol = 'csv'\n[sink.csv]\noutput-field-header = true\n")
    uri = f"file://{tmp_path}/out?protocol=csv"
    sink = create_sink(uri, cfg, "cf")
    w = Workload(mariadb, fresh_db, dst)
    sink.apply_ddl(w.ddl(T1_DDL, "t1", DDLType.CREATE_TABLE, w.t1))
    ts = w.next_ts()
    batch1 = [w.insert("t1", t1_row(i), ts, i) for i in range(1, 4)]
    write(sink, batch1, w, 1)
    ts = w.next_ts()
    batch2 = [w.update("t1", 1, t1_row(10, "moved"), ts, 0), w.delete("t1", 2, ts, 1)]
    write(sink, batch2, w, 2)
    write(sink, batch2, w, 2)  # the retried batch
    sink.flush_metadata(ts)
    with StorageConsumer(uri, f"mysql://root:@127.0.0.1:{mariadb.port}/", cfg) as consumer:
        s = consumer.run_once()
    assert s.files == 3 and s.rows == 3 + 3 + 3
    assert table_rows(mariadb, dst, "t1") == table_rows(mariadb, fresh_db, "t1")
