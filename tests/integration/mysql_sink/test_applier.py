"""MySQLApplier against a real downstream MariaDB: every type, replays, key changes, no-PK, hostile names."""

from __future__ import annotations

import datetime
import threading
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest

from sparkcdc.capture.catalog import SchemaCatalog
from sparkcdc.errors import SinkError
from sparkcdc.model import ColumnInfo, IndexInfo, RowChange, TableInfo
from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.sink.mysql import ConnParams, MySQLApplier

pytestmark = pytest.mark.integration


def pk(*cols: str) -> tuple[IndexInfo, ...]:
    return (IndexInfo("PRIMARY", cols, unique=True, primary=True),)


class Rows:
    """Builds RowChanges with increasing commit_ts (one transaction per call unless ts is given)."""

    def __init__(self, table: TableInfo) -> None:
        self.table = table
        self.ts = 1000
        self.seq = 0

    def _rc(self, op: str, before: Any, after: Any, ts: int | None) -> tuple[RowChange, TableInfo]:
        if ts is None:
            self.ts += 1
            ts = self.ts
        self.seq += 1
        r = RowChange(
            op=op,
            schema=self.table.schema,
            table=self.table.table,  # type: ignore[arg-type]
            table_version=0,
            commit_ts=ts,
            before=before,
            after=after,
            seq=self.seq,
        )
        return r, self.table

    def ins(self, row: tuple[Any, ...], ts: int | None = None) -> tuple[RowChange, TableInfo]:
        return self._rc("I", None, row, ts)

    def upd(
        self, before: tuple[Any, ...], after: tuple[Any, ...], ts: int | None = None
    ) -> tuple[RowChange, TableInfo]:
        return self._rc("U", before, after, ts)

    def dele(self, row: tuple[Any, ...], ts: int | None = None) -> tuple[RowChange, TableInfo]:
        return self._rc("D", row, None, ts)


def raw_rows(db: LocalMariaDB, sql: str) -> list[tuple[Any, ...]]:
    """Rows as the server's text (no client-side conversion)."""
    conn = db.connect(conv={})
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())
    finally:
        conn.close()


ALL_TYPES_DDL = """CREATE TABLE all_types (
  id INT PRIMARY KEY, ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, mi MEDIUMINT, bi BIGINT,
  biu BIGINT UNSIGNED, f FLOAT, d DOUBLE, dec1 DECIMAL(10,2), dec2 DECIMAL(65,30),
  dt DATE, dtm DATETIME(3), ts TIMESTAMP(6) NULL, tm TIME, tm2 TIME(2), y YEAR,
  c CHAR(5), vc VARCHAR(64), tx TEXT, bn BINARY(4), vb VARBINARY(16), bl BLOB,
  e ENUM('a','b','c'), s SET('x','y','z'), b8 BIT(8), b64 BIT(64), j JSON,
  g INT AS (id * 2) VIRTUAL
)"""

ALL_TYPES = TableInfo(
    schema="",
    table="all_types",
    columns=(
        ColumnInfo("id", "int", nullable=False),
        ColumnInfo("ti", "tinyint"),
        ColumnInfo("tiu", "tinyint", unsigned=True),
        ColumnInfo("si", "smallint"),
        ColumnInfo("mi", "mediumint"),
        ColumnInfo("bi", "bigint"),
        ColumnInfo("biu", "bigint", unsigned=True),
        ColumnInfo("f", "float"),
        ColumnInfo("d", "double"),
        ColumnInfo("dec1", "decimal", precision=10, scale=2),
        ColumnInfo("dec2", "decimal", precision=65, scale=30),
        ColumnInfo("dt", "date"),
        ColumnInfo("dtm", "datetime", fsp=3),
        ColumnInfo("ts", "timestamp", fsp=6),
        ColumnInfo("tm", "time"),
        ColumnInfo("tm2", "time", fsp=2),
        ColumnInfo("y", "year"),
        ColumnInfo("c", "char", length=5),
        ColumnInfo("vc", "varchar", length=64),
        ColumnInfo("tx", "text"),
        ColumnInfo("bn", "binary", length=4),
        ColumnInfo("vb", "varbinary", length=16),
        ColumnInfo("bl", "blob"),
        ColumnInfo("e", "enum", elements=("a", "b", "c")),
        ColumnInfo("s", "set", elements=("x", "y", "z")),
        ColumnInfo("b8", "bit", length=8),
        ColumnInfo("b64", "bit", length=64),
        ColumnInfo("j", "json"),
        ColumnInfo("g", "int", generated=True),
    ),
    indexes=pk("id"),
)

FULL_ROW = (
    1,
    -128,
    255,
    -32768,
    8388607,
    -(2**63),
    2**64 - 1,
    3.140000104904175,
    1e300,
    Decimal("12.50"),
    Decimal("-12345678901234567890123456789012345.123456789012345678901234567891"),
    "2024-01-02",
    "2024-01-02 03:04:05.678",
    "2024-01-02 03:04:05.123456",
    "-838:59:59",
    "12:34:56.78",
    2024,
    "ab",
    "héllo 😀 'q' \"dq\" \\ %s",
    "line1\nline2\ttab\x00nul",
    b"\x00\x01\x02\x03",
    b"\x00'\"\\%s",
    bytes(range(256)),
    "b",
    "x,z",
    65,
    2**64 - 1,
    '{"k": [1, 2], "s": "<&>"}',
    2,
)
ZERO_ROW = (
    2,
    0,
    0,
    0,
    0,
    0,
    0,
    0.0,
    0.0,
    Decimal("0.00"),
    Decimal("0E-30"),
    "0000-00-00",
    "0000-00-00 00:00:00.000",
    None,
    "00:00:00",
    "00:00:00.00",
    0,
    "",
    "",
    "",
    b"\x00\x00\x00\x00",
    b"",
    b"",
    "",
    "",
    0,
    0,
    "null",
    4,
)
NULL_ROW = (3, *([None] * 27), 6)

EXPECTED_FULL = (
    "1",
    "-128",
    "255",
    "-32768",
    "8388607",
    str(-(2**63)),
    str(2**64 - 1),
    "3.14",
    "1e300",
    "12.50",
    "-12345678901234567890123456789012345.123456789012345678901234567891",
    "2024-01-02",
    "2024-01-02 03:04:05.678",
    "2024-01-02 03:04:05.123456",
    "-838:59:59",
    "12:34:56.78",
    "2024",
    "ab",
    "héllo 😀 'q' \"dq\" \\ %s",
    "line1\nline2\ttab\x00nul",
    b"\x00\x01\x02\x03",
    b"\x00'\"\\%s",
    bytes(range(256)),
    "b",
    "x,z",
    b"A",
    b"\xff" * 8,
    '{"k": [1, 2], "s": "<&>"}',
    "2",
)


def test_every_type_round_trips(downstream: LocalMariaDB, down_db: str, conn_params: ConnParams) -> None:
    table = TableInfo(down_db, ALL_TYPES.table, ALL_TYPES.columns, ALL_TYPES.indexes)
    r = Rows(table)
    with MySQLApplier(conn_params) as ap:
        assert ap.apply_ddl(down_db, ALL_TYPES_DDL)
        ap.apply_rows([r.ins(FULL_ROW), r.ins(ZERO_ROW), r.ins(NULL_ROW)])
        got = raw_rows(downstream, f"SELECT * FROM `{down_db}`.all_types ORDER BY id")
        assert got[0] == EXPECTED_FULL
        assert got[1][11:13] == ("0000-00-00", "0000-00-00 00:00:00.000")
        assert got[1][25:28] == (b"\x00", b"\x00" * 8, "null")
        assert got[2][1:28] == (None,) * 27
        # Update every column of row 1 to row 2's values (new key), delete row 3.
        moved = (4, *ZERO_ROW[1:])
        ap.apply_rows([r.upd(FULL_ROW, moved), r.dele(NULL_ROW)])
        got = raw_rows(downstream, f"SELECT id, vc, bl, b64 FROM `{down_db}`.all_types ORDER BY id")
        assert got == [("2", "", b"", b"\x00" * 8), ("4", "", b"", b"\x00" * 8)]
        # And back, in safe mode (DELETE + REPLACE), matching on the binary/bit/decimal key-less way too.
        ap.apply_rows([r.upd(moved, FULL_ROW)], replicating_ts=r.ts + 10)
        got = raw_rows(downstream, f"SELECT * FROM `{down_db}`.all_types WHERE id = 1")
        assert got[0] == EXPECTED_FULL


def test_replay_is_idempotent_with_and_without_replicating_ts(
    downstream: LocalMariaDB, down_db: str, conn_params: ConnParams
) -> None:
    t = TableInfo(
        down_db,
        "acct",
        (
            ColumnInfo("id", "int", nullable=False),
            ColumnInfo("v", "varchar", length=20),
            ColumnInfo("u", "int", nullable=False),
        ),
        (*pk("id"), IndexInfo("uk_u", ("u",), unique=True)),
    )
    r = Rows(t)
    seq = [
        r.ins((1, "a", 10)),
        r.ins((2, "b", 20)),
        r.ins((3, "c", 30)),
        r.upd((1, "a", 10), (1, "a2", 10)),
        r.upd((2, "b", 20), (5, "b", 21)),  # key change
        r.dele((3, "c", 30)),
        r.ins((3, "c2", 30)),  # re-insert a deleted key
        r.upd((1, "a2", 10), (1, "a3", 20)),  # takes the unique value 2 gave up
        r.ins((6, "f", 60)),
        r.dele((6, "f", 60)),
    ]
    with MySQLApplier(conn_params) as ap:
        ap.apply_ddl(down_db, "CREATE TABLE acct (id INT PRIMARY KEY, v VARCHAR(20), u INT NOT NULL UNIQUE)")
        ap.apply_rows(seq)
        want = raw_rows(downstream, f"SELECT * FROM `{down_db}`.acct ORDER BY id")
        assert want == [("1", "a3", "20"), ("3", "c2", "30"), ("5", "b", "21")]
        assert ap.stats.safe_retries == 0
        # A restart replays everything without knowing what was applied: INSERT hits a duplicate
        # key, the transaction is redone in safe mode.
        ap.apply_rows(seq)
        assert raw_rows(downstream, f"SELECT * FROM `{down_db}`.acct ORDER BY id") == want
        assert ap.stats.safe_retries >= 1
        # Replaying below replicating_ts uses REPLACE from the start.
        before = ap.stats.safe_retries
        ap.apply_rows(seq, replicating_ts=r.ts)
        ap.apply_rows(seq[:5], replicating_ts=r.ts)
        ap.apply_rows(seq[5:], replicating_ts=r.ts)
        assert raw_rows(downstream, f"SELECT * FROM `{down_db}`.acct ORDER BY id") == want
        assert ap.stats.safe_retries == before


def test_key_changing_updates_chain_and_swap(
    downstream: LocalMariaDB, down_db: str, conn_params: ConnParams
) -> None:
    t = TableInfo(
        down_db,
        "k",
        (ColumnInfo("id", "int", nullable=False), ColumnInfo("v", "varchar", length=5)),
        pk("id"),
    )
    r = Rows(t)
    with MySQLApplier(conn_params, safe_mode=True) as ap:
        ap.apply_ddl(down_db, "CREATE TABLE k (id INT PRIMARY KEY, v VARCHAR(5))")
        ts = 5000
        # One transaction: 1→2, then 2→3 (a chain through a key just written), then a swap via a temp key.
        txn = [
            r.ins((1, "one"), ts),
            r.ins((10, "ten"), ts),
            r.ins((20, "tw"), ts),
            r.upd((1, "one"), (2, "one"), ts + 1),
            r.upd((2, "one"), (3, "one"), ts + 1),
            r.upd((10, "ten"), (99, "ten"), ts + 2),
            r.upd((20, "tw"), (10, "tw"), ts + 2),
            r.upd((99, "ten"), (20, "ten"), ts + 2),
        ]
        ap.apply_rows(txn)
        want = [("3", "one"), ("10", "tw"), ("20", "ten")]
        assert raw_rows(downstream, f"SELECT * FROM `{down_db}`.k ORDER BY id") == want
    with MySQLApplier(conn_params, safe_mode=False) as ap:
        ap.apply_rows(txn)
        assert raw_rows(downstream, f"SELECT * FROM `{down_db}`.k ORDER BY id") == want


def test_table_without_primary_key(downstream: LocalMariaDB, down_db: str, conn_params: ConnParams) -> None:
    t = TableInfo(
        down_db,
        "nopk",
        (
            ColumnInfo("a", "int"),
            ColumnInfo("b", "varchar", length=10),
            ColumnInfo("f", "double"),
            ColumnInfo("bn", "varbinary", length=4),
        ),
    )
    r = Rows(t)
    with MySQLApplier(conn_params) as ap:
        ap.apply_ddl(down_db, "CREATE TABLE nopk (a INT, b VARCHAR(10), f DOUBLE, bn VARBINARY(4))")
        ap.apply_rows(
            [r.ins((1, "x", 0.5, b"\x00")), r.ins((1, "x", 0.5, b"\x00")), r.ins((2, None, None, None))]
        )
        # Delete one of two identical rows, update the row with NULLs, in one transaction each.
        ap.apply_rows([r.dele((1, "x", 0.5, b"\x00")), r.upd((2, None, None, None), (2, "y", 1.5, b"\x01"))])
        got = raw_rows(downstream, f"SELECT a, b, f, bn FROM `{down_db}`.nopk ORDER BY a")
        assert got == [("1", "x", "0.5", b"\x00"), ("2", "y", "1.5", b"\x01")]
    with MySQLApplier(conn_params, safe_mode=True) as ap:
        ap.apply_rows([r.upd((1, "x", 0.5, b"\x00"), (7, "z", 0.5, b"\x00"))])
        got = raw_rows(downstream, f"SELECT a, b FROM `{down_db}`.nopk ORDER BY a")
        assert got == [("2", "y"), ("7", "z")]


HOSTILE_SCHEMA = "we`ird 'db\" %s"


def test_hostile_identifiers(downstream: LocalMariaDB, conn_params: ConnParams) -> None:
    table_name = "sel`ect 'from\" %s"
    cols = ("order", "a`b", "c'd\"e", "%s %d", "数据")
    t = TableInfo(
        HOSTILE_SCHEMA,
        table_name,
        tuple(
            ColumnInfo(c, "int" if i == 0 else "varchar", length=20, nullable=i != 0)
            for i, c in enumerate(cols)
        ),
        pk("order"),
    )
    r = Rows(t)
    q = "`" + HOSTILE_SCHEMA.replace("`", "``") + "`"
    tq = "`" + table_name.replace("`", "``") + "`"
    with MySQLApplier(conn_params) as ap:
        ap.apply_ddl(None, f"DROP DATABASE IF EXISTS {q}")
        ap.apply_ddl(HOSTILE_SCHEMA, f"CREATE DATABASE {q}")
        ddl = (
            f"CREATE TABLE {tq} ("
            + ", ".join(
                "`" + c.replace("`", "``") + "` " + ("INT PRIMARY KEY" if i == 0 else "VARCHAR(20)")
                for i, c in enumerate(cols)
            )
            + ")"
        )
        ap.apply_ddl(HOSTILE_SCHEMA, ddl)
        ap.apply_rows(
            [
                r.ins((1, "%s", "'", "`", "x")),
                r.ins((2, "a", "b", "c", "d")),
                r.upd((2, "a", "b", "c", "d"), (3, "%d", "b", "c", "d")),
                r.dele((1, "%s", "'", "`", "x")),
            ]
        )
        got = downstream.query(f"SELECT * FROM {q}.{tq}")
        assert got == [(3, "%d", "b", "c", "d")]
        ap.apply_ddl(None, f"DROP DATABASE {q}")


def test_ddl_replay_is_tolerated(downstream: LocalMariaDB, down_db: str, conn_params: ConnParams) -> None:
    ddls = [
        "CREATE TABLE t1 (id INT PRIMARY KEY, a INT)",
        "ALTER TABLE t1 ADD COLUMN b INT",
        "ALTER TABLE t1 ADD INDEX ix_a (a)",
        "ALTER TABLE t1 DROP COLUMN a",
        "CREATE TABLE t2 (id INT PRIMARY KEY)",
        "RENAME TABLE t2 TO t3",
        "DROP TABLE t3",
    ]
    with MySQLApplier(conn_params) as ap:
        # A restart replays the DDL the checkpoint had not passed yet: each one applied twice.
        assert [(ap.apply_ddl(down_db, d), ap.apply_ddl(down_db, d)) for d in ddls] == [(True, False)] * len(
            ddls
        )
        assert ap.stats.ddls_skipped == len(ddls)
        cols = downstream.query(
            "SELECT column_name FROM information_schema.columns WHERE table_schema=%s AND table_name='t1' "
            "ORDER BY ordinal_position",
            (down_db,),
        )
        assert cols == [("id",), ("b",)]
        # A DDL that is wrong (not a replay) still fails loudly.
        with pytest.raises(SinkError, match="t_missing"):
            ap.apply_ddl(down_db, "ALTER TABLE t_missing ADD COLUMN x INT")
        # CREATE DATABASE replay where the schema already exists / is the schema itself.
        assert ap.apply_ddl(down_db, f"CREATE DATABASE `{down_db}`") is False
        assert ap.apply_ddl("nope_db_x", "CREATE DATABASE nope_db_x") is True
        assert ap.apply_ddl("nope_db_x", "DROP DATABASE nope_db_x") is True
        assert ap.apply_ddl("nope_db_x", "DROP DATABASE nope_db_x") is False


def test_big_transactions_and_batching(
    downstream: LocalMariaDB, down_db: str, conn_params: ConnParams
) -> None:
    t = TableInfo(down_db, "big", (ColumnInfo("id", "int", nullable=False), ColumnInfo("v", "int")), pk("id"))
    r = Rows(t)
    rows = [r.ins((i, i), 7000 + i // 50) for i in range(1000)]  # 20 transactions of 50 rows
    with MySQLApplier(conn_params, max_txn_row=128) as ap:
        ap.apply_ddl(down_db, "CREATE TABLE big (id INT PRIMARY KEY, v INT)")
        ap.apply_rows(rows)
        assert ap.stats.txns == 10  # two whole 50-row transactions per 128-row downstream transaction
        assert ap.stats.statements == 10  # one multi-row INSERT each
        assert downstream.query(f"SELECT COUNT(*), SUM(v) FROM `{down_db}`.big") == [(1000, Decimal(499500))]
        deletes = [r.dele((i, i), 9000) for i in range(0, 1000, 2)]
        ap.apply_rows(deletes)
        assert downstream.query(f"SELECT COUNT(*) FROM `{down_db}`.big") == [(500,)]
    with MySQLApplier(conn_params, max_txn_row=128, split_txn=False) as ap:
        ap.apply_rows([r.upd((i, i), (i, -i), 9500) for i in range(1, 1000, 2)])
        assert ap.stats.txns == 1  # transaction-atomicity=table keeps the 500-row transaction whole
        assert ap.stats.round_trips < 50  # single-row UPDATEs are packed into multi-statement round trips
        assert downstream.query(f"SELECT SUM(v) FROM `{down_db}`.big") == [(Decimal(-250000),)]


def test_connection_killed_mid_stream_is_retried(
    downstream: LocalMariaDB, down_db: str, conn_params: ConnParams
) -> None:
    t = TableInfo(down_db, "kc", (ColumnInfo("id", "int", nullable=False), ColumnInfo("v", "int")), pk("id"))
    r = Rows(t)
    with MySQLApplier(conn_params, max_txn_row=10, retry_backoff=0.05) as ap:
        ap.apply_ddl(down_db, "CREATE TABLE kc (id INT PRIMARY KEY, v INT)")
        ap.apply_rows([r.ins((i, i)) for i in range(10)])
        # Kill the applier's session from outside (a real server-side fault), then keep applying.
        conn_id = ap.connection().thread_id()
        downstream.execute(f"KILL CONNECTION {conn_id}")
        ap.apply_rows([r.ins((i, i)) for i in range(10, 30)])
        assert ap.stats.retries >= 1
        assert downstream.query(f"SELECT COUNT(*) FROM `{down_db}`.kc") == [(30,)]


def test_refused_rows_raise_sink_error_naming_the_table(down_db: str, conn_params: ConnParams) -> None:
    t = TableInfo(down_db, "missing", (ColumnInfo("id", "int", nullable=False),), pk("id"))
    with MySQLApplier(conn_params) as ap, pytest.raises(SinkError, match=rf"{down_db}\.missing"):
        ap.apply_rows([Rows(t).ins((1,))])


def test_concurrent_appliers_on_different_tables(
    downstream: LocalMariaDB, down_db: str, conn_params: ConnParams
) -> None:
    tables = [
        TableInfo(down_db, f"w{i}", (ColumnInfo("id", "int", nullable=False),), pk("id")) for i in range(4)
    ]
    with MySQLApplier(conn_params) as ap:
        for t in tables:
            ap.apply_ddl(down_db, f"CREATE TABLE {t.table} (id INT PRIMARY KEY)")
    errors: list[BaseException] = []

    def work(t: TableInfo) -> None:
        try:
            r = Rows(t)
            with MySQLApplier(conn_params) as ap:
                ap.apply_rows([r.ins((i,)) for i in range(500)])
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in tables]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not errors
    for t in tables:
        assert downstream.query(f"SELECT COUNT(*) FROM `{down_db}`.{t.table}") == [(500,)]


def test_wrong_password_is_a_clear_error(conn_params: ConnParams) -> None:
    bad = replace(conn_params, password="wrong")
    with pytest.raises(SinkError, match="access denied"):
        MySQLApplier(bad).connection()


def test_progress_table_makes_replays_exactly_once(
    downstream: LocalMariaDB, down_db: str, conn_params: ConnParams
) -> None:
    t = TableInfo(
        down_db, "events", (ColumnInfo("a", "int"), ColumnInfo("b", "varchar", length=10))
    )  # no key
    r = Rows(t)
    seq = [
        r.ins((1, "x"), 100),
        r.ins((1, "x"), 100),
        r.ins((2, "y"), 101),
        r.dele((1, "x"), 102),
        r.upd((2, "y"), (2, "z"), 103),
        r.ins((3, "w"), 104),
    ]
    want = [("1", "x"), ("2", "z"), ("3", "w")]
    with MySQLApplier(conn_params, progress_id="cf-progress", max_txn_row=2) as ap:
        ap.apply_ddl(down_db, "CREATE TABLE events (a INT, b VARCHAR(10))")
        assert ap.apply_rows(seq[:3]) == 3
    # A restart: a new applier replays from an older checkpoint; nothing is applied twice.
    with MySQLApplier(conn_params, progress_id="cf-progress", max_txn_row=2) as ap:
        assert ap.applied_position(down_db, "events") == (101, seq[2][0].seq, True)
        assert ap.apply_rows(seq) == 3
        assert ap.stats.rows_skipped == 3
        assert raw_rows(downstream, f"SELECT a, b FROM `{down_db}`.events ORDER BY a") == want
        # A killed connection: the retry re-reads the progress before applying again.
        downstream.execute(f"KILL CONNECTION {ap.connection().thread_id()}")
        assert ap.apply_rows([*seq, r.ins((4, "v"), 105)]) == 1
        assert ap.stats.retries == 1
    want.append(("4", "v"))
    assert raw_rows(downstream, f"SELECT a, b FROM `{down_db}`.events ORDER BY a") == want
    # Another changefeed id has its own progress.
    with MySQLApplier(conn_params, progress_id="other") as ap:
        assert ap.applied_position(down_db, "events") is None
    got = downstream.query(
        "SELECT changefeed_id, table_name, commit_ts FROM sparkcdc.mysql_sink_progress WHERE table_schema = %s",
        (down_db,),
    )
    assert got == [("cf-progress", "events", 105)]


def test_progress_of_a_split_transaction_replays_it_in_safe_mode(
    downstream: LocalMariaDB, down_db: str, conn_params: ConnParams
) -> None:
    t1 = TableInfo(down_db, "t1", (ColumnInfo("id", "int", nullable=False),), pk("id"))
    t2 = TableInfo(down_db, "t2", (ColumnInfo("id", "int", nullable=False),), pk("id"))
    r1, r2 = Rows(t1), Rows(t2)
    txn = [r1.ins((i,), 500) for i in range(4)] + [r2.ins((1,), 500)]
    with MySQLApplier(conn_params, progress_id="cf-split", max_txn_row=2) as ap:
        ap.apply_ddl(down_db, "CREATE TABLE t1 (id INT PRIMARY KEY)")
        # t2 is missing: the transaction's last piece fails after two pieces were committed.
        with pytest.raises(SinkError, match="t2"):
            ap.apply_rows(txn)
        assert ap.applied_position(down_db, "t1") == (500, txn[3][0].seq, False)
    with MySQLApplier(conn_params, progress_id="cf-split", max_txn_row=2) as ap:
        ap.apply_ddl(down_db, "CREATE TABLE t2 (id INT PRIMARY KEY)")
        # The half-applied transaction is applied again, idempotently, not skipped.
        assert ap.apply_rows(txn) == 5
        assert ap.stats.safe_retries == 0 and ap.stats.rows_skipped == 0
        # Once the last piece committed, the whole transaction counts as applied for every table.
        assert ap.applied_position(down_db, "t1") == (500, txn[3][0].seq, True)
        assert ap.applied_position(down_db, "t2") == (500, txn[4][0].seq, True)
    with MySQLApplier(conn_params, progress_id="cf-split", max_txn_row=2) as ap:
        assert ap.apply_rows(txn) == 0
        assert ap.stats.rows_skipped == 5
    assert downstream.query(f"SELECT COUNT(*) FROM `{down_db}`.t1") == [(4,)]
    assert downstream.query(f"SELECT COUNT(*) FROM `{down_db}`.t2") == [(1,)]


def test_a_ddl_of_unknown_mode_keeps_zero_values_when_renumbering_them_collides(
    downstream: LocalMariaDB, down_db: str, conn_params: ConnParams
) -> None:
    # main/auto_increment: the upstream session had NO_AUTO_VALUE_ON_ZERO, and TiCDC's formats do
    # not carry a DDL's mode, so a consumer ran the ALTER under the server's default and 0 became
    # 1, a duplicate. The upstream ran it over the same rows: it kept the 0.
    for t in ("kept", "numbered", "recorded"):
        downstream.execute(f"CREATE TABLE `{down_db}`.{t} (id INT NOT NULL, v CHAR(1))")
    downstream.execute(
        f"INSERT INTO `{down_db}`.kept VALUES (0, 'z'), (1, 'a')",
        f"INSERT INTO `{down_db}`.numbered VALUES (0, 'z'), (5, 'a')",
        f"INSERT INTO `{down_db}`.recorded VALUES (0, 'z'), (1, 'a')",
    )
    alter = "ALTER TABLE {} MODIFY id INT NOT NULL AUTO_INCREMENT PRIMARY KEY"
    with MySQLApplier(conn_params) as ap:
        assert ap.apply_ddl(down_db, alter.format("kept")) is True
        # no collision: the default mode numbers the 0, as an upstream without the flag did
        assert ap.apply_ddl(down_db, alter.format("numbered")) is True
        # a recorded mode is the upstream's own (the MySQL sink): no second try
        with pytest.raises(SinkError, match="resequencing"):
            ap.apply_ddl(down_db, alter.format("recorded"), sql_mode="")
    assert downstream.query(f"SELECT id, v FROM `{down_db}`.kept ORDER BY id") == [(0, "z"), (1, "a")]
    numbered = downstream.query(f"SELECT id, v FROM `{down_db}`.numbered ORDER BY id")
    assert [v for _, v in numbered] == ["z", "a"] and 0 not in [i for i, _ in numbered]


def test_a_period_key_table_replays_in_safe_mode_without_replace(
    downstream: LocalMariaDB, down_db: str, conn_params: ConnParams
) -> None:
    """MariaDB refuses ``REPLACE`` on a table with a key ``WITHOUT OVERLAPS``: safe mode deletes
    the row by its key (the period's end and start included) and inserts it."""

    ddl = (
        "CREATE TABLE rooms (id INT, s DATE NOT NULL, e DATE NOT NULL, v INT, PERIOD FOR p (s, e), "
        "PRIMARY KEY (id, p WITHOUT OVERLAPS))"
    )
    cat = SchemaCatalog()
    cat.add_database(down_db)
    cat.apply_ddl(ddl, down_db, 1)
    t = cat.get(down_db, "rooms")
    assert t is not None and t.indexes[0].without_overlaps
    d = [datetime.date(2020, m, 1) for m in range(1, 7)]
    r = Rows(t)
    seq = [
        r.ins((1, d[0], d[2], 1)),
        r.ins((1, d[2], d[4], 2)),  # the same id over the next period
        r.ins((2, d[0], d[5], 3)),
        r.upd((1, d[0], d[2], 1), (1, d[0], d[2], 10)),
        r.upd((2, d[0], d[5], 3), (2, d[1], d[5], 3)),  # the period (a key part) changes
        r.dele((1, d[2], d[4], 2)),
        r.ins((1, d[3], d[5], 4)),
    ]
    query = f"SELECT id, s, e, v FROM `{down_db}`.rooms ORDER BY id, s"
    with MySQLApplier(conn_params) as ap:
        ap.apply_ddl(down_db, ddl)
        ap.apply_rows(seq)
        want = raw_rows(downstream, query)
        assert [x[0] + x[3] for x in want] == ["110", "14", "23"]
        # a replay after a restart: the first INSERT hits a duplicate key, safe mode redoes the transaction
        ap.apply_rows(seq)
        assert raw_rows(downstream, query) == want
        assert ap.stats.safe_retries >= 1
        ap.apply_rows(seq, replicating_ts=r.ts)  # below replicating_ts: safe mode from the start
        assert raw_rows(downstream, query) == want
    # the same table without the mark gets REPLACE, which the downstream refuses
    plain = replace(t, indexes=(replace(t.indexes[0], without_overlaps=False),), _pos={})
    with MySQLApplier(conn_params, safe_mode=True) as ap, pytest.raises(SinkError) as refused:
        ap.apply_rows([(rc, plain) for rc, _ in seq[:1]])
    assert "doesn't yet support 'WITHOUT OVERLAPS'" in str(refused.value)


def test_text_its_charset_table_holds_but_python_cannot_read_arrives_byte_for_byte(
    mariadb: LocalMariaDB, downstream: LocalMariaDB, down_db: str, conn_params: ConnParams
) -> None:
    """MariaDB's ``sjis`` takes sequences Python's ``shift_jis`` has no character for (NEC's row 13,
    ``0x8740``; main/ctype_sjis), and Python's ``euc_jp`` reads ujis ``0xA1C0`` as U+FF3C where
    MariaDB reads U+005C. Capture keeps unreadable bytes as lone surrogates; the sink sends the
    column's bytes back, so the downstream holds what the upstream does."""
    from sparkcdc.capture.start import head_offset
    from tests.integration.capture.helpers import read_all, upstream

    ddl = "CREATE TABLE j (id INT PRIMARY KEY, c VARCHAR(10) CHARACTER SET sjis, u VARCHAR(10) CHARACTER SET ujis)"
    src = "src_sjis_bytes"
    mariadb.execute(f"DROP DATABASE IF EXISTS {src}", f"CREATE DATABASE {src}", f"USE {src}", ddl)
    start = head_offset(upstream(mariadb))
    mariadb.execute(
        f"INSERT INTO {src}.j VALUES (1, X'8740', X'8FA2AF'), (2, X'82A0874082A2', 'x'), (3, 'plain', X'A1C0')",
        f"UPDATE {src}.j SET c = X'87408741' WHERE id = 2",
    )
    changes = read_all(mariadb, start, schema=src)
    assert len(changes) == 4 and any(
        "\udc87" in v for rc in changes for v in rc.after or () if isinstance(v, str)
    ), "Python read those bytes"
    with mariadb.connect() as conn:
        info = SchemaCatalog.load_from_upstream(conn, [src]).get(src, "j")
    assert info is not None
    dest = info.renamed(down_db, "j")
    with MySQLApplier(conn_params) as ap:
        ap.apply_ddl(down_db, ddl)
        ap.apply_rows([(rc, dest) for rc in changes])
    query = "SELECT id, HEX(c), HEX(u) FROM {}.j ORDER BY id"
    want = raw_rows(mariadb, query.format(src))
    assert want[1] == ("2", "87408741", "78") and want[2][2] == "A1C0"
    assert raw_rows(downstream, query.format(down_db)) == want
    # the same text where the table's character set is unknown (a storage schema file carries
    # none): refused at once, naming the table and the value, not retried
    blind = replace(dest, columns=tuple(replace(c, charset=None) for c in dest.columns), _pos={})
    with MySQLApplier(conn_params) as ap, pytest.raises(SinkError) as refused:
        ap.apply_rows([(changes[0], blind)])
    assert "hold text that is not Unicode" in str(refused.value) and "src_sjis_bytes.j" in str(refused.value)
    assert ap.stats.retries == 0
