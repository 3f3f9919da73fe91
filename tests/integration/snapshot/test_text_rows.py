"""The C row reader (``TextRowReader``) against the binlog decoder and PyMySQL's parsing, on a real MariaDB."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pymysql
import pytest

from sparkcdc.capture import snapshot as cs
from sparkcdc.capture.catalog import SchemaCatalog
from sparkcdc.capture.start import head_offset
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.model import RowChange, TableInfo
from sparkcdc.services.mariadb import LocalMariaDB
from tests.integration.capture.helpers import read_all
from tests.integration.capture.test_types import COLUMNS, ROWS

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(cs._textrows is None, reason="the C row reader is not built"),
]

EXTRA_ROWS = [
    # negative and fractional values, precise decimals, multi-byte text, binary with quotes and NULs
    (
        "-1", "1", "-1", "1", "-1", "1", "-1", "1", "-1", "1",
        "-0.1", "-1e-300", "-0.05", "-0.000000000000000000000000000001", "0",
        "'2000-02-29'", "'1000-01-01 00:00:00'", "'2024-01-01 00:00:00.001'", "'2024-01-01 23:59:59.999999'",
        "'2024-06-30 12:00:00.000001'", "'2024-06-30 12:00:00'",
        "'-00:00:00'", "'-00:00:00.1'", "'-838:00:00.0001'", "'00:00:00.000001'",
        "1901", "'中文'", "'a\\tb\\nc\\\\d\\'e\"f'", "CONCAT('𝄞', REPEAT('ü', 100))", "''",
        "x'27005C22'", "x'FF'", "x'0D0A'", "x'00'",
        "b'0'", "b'1'", "b'0111111111111111111111111111111111111111111111111111111111111111'",
        "'é'", "'x,y,z'", "'{\"a\": null, \"b\": -0.5, \"c\": \"\\\\u00e9\"}'", "'🙂'",
    ),
]  # fmt: skip


def _info(db: LocalMariaDB, schema: str, table: str) -> TableInfo:
    conn = db.connect()
    try:
        cat = SchemaCatalog.load_from_upstream(conn, None, 1)
    finally:
        conn.close()
    info = cat.get(schema, table)
    assert info is not None
    return info


def _all_types(db: LocalMariaDB, schema: str) -> tuple[TableInfo, Any]:
    cols = ", ".join(f"`{n}` {t}" for n, t in COLUMNS)
    db.execute(f"CREATE TABLE `{schema}`.all_types (id INT PRIMARY KEY, {cols})")
    start = head_offset(UpstreamConfig.from_uri(db.uri))
    conn = db.connect(schema)
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00', sql_mode = ''")
        for i, row in enumerate(ROWS + EXTRA_ROWS, start=1):
            cur.execute(f"INSERT INTO all_types VALUES ({i}, {', '.join(row)})")
    conn.close()
    return _info(db, schema, "all_types"), start


def _read_both(db: LocalMariaDB, info: TableInfo, tz: str, limit: int = 100) -> tuple[list[Any], list[Any]]:
    """(rows of the C reader, rows of PyMySQL converted by RowConverter) of one chunk of the whole table."""
    up = UpstreamConfig.from_uri(db.uri)
    conn = up.connect(conv=cs.reader_conv())
    try:
        reader = cs.TextRowReader(info, tz)
        assert reader.usable
        fast = cs.read_values(conn, reader, None, None, limit)
        again = cs.read_values(conn, reader, None, None, limit)  # the connection stays in step
        ref = [cs.RowConverter(info, tz).convert(r) for r in cs.read_chunk(conn, info, None, None, limit)]
    finally:
        conn.close()
    assert fast == again
    return fast, ref


@pytest.mark.parametrize("tz", ["UTC", "+05:30", "America/New_York"])
def test_c_reader_values_equal_the_binlog_decoders_and_pymysqls(
    mariadb: LocalMariaDB, fresh_db: str, tz: str
) -> None:
    """Every supported type, NULLs, zero dates, limits, negatives and fractions: same values, same types."""
    info, start = _all_types(mariadb, fresh_db)
    binlog = {
        ev.after[0]: ev.after
        for ev in read_all(mariadb, start, fresh_db, tz=tz)
        if isinstance(ev, RowChange) and ev.after
    }
    fast, ref = _read_both(mariadb, info, tz)
    assert len(fast) == len(ROWS) + len(EXTRA_ROWS) == len(binlog)
    for got, want in zip(fast, ref, strict=True):
        expected = binlog[got[0]]
        for k, c in enumerate(info.columns):
            assert got[k] == expected[k], f"{tz} row {got[0]} column {c.name}: {got[k]!r} != {expected[k]!r}"
            assert type(got[k]) is type(expected[k]), f"row {got[0]} column {c.name}"
            assert got[k] == want[k] and type(got[k]) is type(want[k]), f"row {got[0]} column {c.name}"
            if isinstance(got[k], Decimal):
                assert str(got[k]) == str(expected[k])  # the digits and the scale, not only the value
        assert cs.key_token(got) == cs.key_token(expected)


def test_c_reader_spans_blocks_and_multi_packet_rows(mariadb: LocalMariaDB, fresh_db: str) -> None:
    """Rows split across read blocks and a row larger than one 16 MiB packet read whole."""
    mariadb.execute("SET GLOBAL max_allowed_packet = 64 * 1024 * 1024")
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, v VARCHAR(20), b LONGBLOB, d DECIMAL(20,4))",
        f"INSERT INTO `{fresh_db}`.t SELECT seq, CONCAT('v', seq), REPEAT(CHAR(seq % 256), seq % 3000), "
        f"seq / 7 FROM `{fresh_db}`.seq_1_to_3000",
        f"INSERT INTO `{fresh_db}`.t VALUES (5000, 'big', REPEAT('z', 17 * 1024 * 1024 + 5), -1.5)",
        f"INSERT INTO `{fresh_db}`.t VALUES (5001, 'after', x'00', NULL)",
    )
    info = _info(mariadb, fresh_db, "t")
    fast, ref = _read_both(mariadb, info, "UTC", limit=10000)
    assert len(fast) == 3002
    assert fast == ref
    big = fast[-2]
    assert big[0] == 5000 and len(big[2]) == 17 * 1024 * 1024 + 5 and big[3] == Decimal("-1.5000")
    assert fast[-1] == (5001, "after", b"\x00", None)


def test_c_reader_raises_a_server_error_in_the_middle_and_the_connection_goes_on(
    mariadb: LocalMariaDB, fresh_db: str
) -> None:
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO `{fresh_db}`.t SELECT seq, seq FROM `{fresh_db}`.seq_1_to_20000",
    )
    info = _info(mariadb, fresh_db, "t")
    conn = UpstreamConfig.from_uri(mariadb.uri).connect(conv=cs.reader_conv())
    try:
        reader = cs.TextRowReader(info)
        # The subquery fails at row 15000, after the server has sent the rows before it.
        sql = f"SELECT id, IF(id = 15000, (SELECT 1 UNION SELECT 2), v) FROM `{fresh_db}`.t ORDER BY id"
        with pytest.raises(pymysql.err.MySQLError) as err:
            reader.select(conn, sql)
        assert err.value.args[0] == 1242  # Subquery returns more than 1 row
        assert reader.select(conn, f"SELECT id, v FROM `{fresh_db}`.t WHERE id <= 3 ORDER BY id") == [
            (1, 1),
            (2, 2),
            (3, 3),
        ]
        with conn.cursor() as cur:
            cur.execute("SELECT 7")
            assert cur.fetchone() == (7,)
    finally:
        conn.close()


def test_keys_read_by_the_c_reader_page_through_a_range(mariadb: LocalMariaDB, fresh_db: str) -> None:
    """Chunks chained by the last key the C reader returned cover a composite-key table once."""
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.t (a DECIMAL(6,2) NOT NULL, b VARBINARY(8) NOT NULL, v INT, PRIMARY KEY (a, b))",
        f"INSERT INTO `{fresh_db}`.t SELECT seq DIV 7 / 4, CONCAT(x'00', seq % 7), seq FROM `{fresh_db}`.seq_1_to_1000",
    )
    info = _info(mariadb, fresh_db, "t")
    reader = cs.TextRowReader(info)
    assert reader.usable
    conn = UpstreamConfig.from_uri(mariadb.uri).connect(conv=cs.reader_conv())
    seen: list[int] = []
    try:
        after = None
        while True:
            rows = cs.read_values(conn, reader, after, None, 37)
            seen += [r[2] for r in rows]
            if len(rows) < 37:
                break
            after = tuple(rows[-1][i] for i in info.handle_key_index)
    finally:
        conn.close()
    assert sorted(seen) == list(range(1, 1001)) and len(seen) == 1000


def test_bit_and_zoned_timestamp_keys_use_the_reference_reader(mariadb: LocalMariaDB, fresh_db: str) -> None:
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.b (k BIT(8) PRIMARY KEY)",
        f"CREATE TABLE `{fresh_db}`.ts (k TIMESTAMP PRIMARY KEY)",
    )
    assert not cs.TextRowReader(_info(mariadb, fresh_db, "b")).usable
    assert cs.TextRowReader(_info(mariadb, fresh_db, "ts"), "UTC").usable
    assert not cs.TextRowReader(_info(mariadb, fresh_db, "ts"), "+01:00").usable
