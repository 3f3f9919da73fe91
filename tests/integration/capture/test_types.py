"""Every MySQL type decodes losslessly: the binlog's values equal a SELECT of the same rows."""

from __future__ import annotations

import struct
from decimal import Decimal

import pytest

from sparkcdc.capture.start import head_offset
from sparkcdc.services.mariadb import LocalMariaDB

from .helpers import read_all, upstream

pytestmark = pytest.mark.integration

COLUMNS = [
    ("ti", "TINYINT"),
    ("tiu", "TINYINT UNSIGNED"),
    ("si", "SMALLINT"),
    ("siu", "SMALLINT UNSIGNED"),
    ("mi", "MEDIUMINT"),
    ("miu", "MEDIUMINT UNSIGNED"),
    ("i", "INT"),
    ("iu", "INT UNSIGNED"),
    ("bi", "BIGINT"),
    ("biu", "BIGINT UNSIGNED"),
    ("f", "FLOAT"),
    ("d", "DOUBLE"),
    ("dec1", "DECIMAL(10,2)"),
    ("dec2", "DECIMAL(65,30)"),
    ("dec3", "DECIMAL(5,0)"),
    ("dt", "DATE"),
    ("dt0", "DATETIME"),
    ("dt3", "DATETIME(3)"),
    ("dt6", "DATETIME(6)"),
    ("ts6", "TIMESTAMP(6) NULL"),
    ("ts0", "TIMESTAMP NULL"),
    ("tm", "TIME"),
    ("tm1", "TIME(1)"),
    ("tm4", "TIME(4)"),
    ("tm6", "TIME(6)"),
    ("y", "YEAR"),
    ("c", "CHAR(10)"),
    ("vc", "VARCHAR(300)"),
    ("txt", "TEXT"),
    ("lat", "VARCHAR(20) CHARACTER SET latin1"),
    ("bn", "BINARY(4)"),
    ("vb", "VARBINARY(300)"),
    ("bl", "BLOB"),
    ("lbl", "LONGBLOB"),
    ("b1", "BIT(1)"),
    ("b10", "BIT(10)"),
    ("b64", "BIT(64)"),
    ("e", "ENUM('a','b,c','é')"),
    ("s", "SET('x','y','z')"),
    ("j", "JSON"),
    ("mt", "MEDIUMTEXT"),
]

ROWS = [
    # limits
    (
        "-128",
        "255",
        "-32768",
        "65535",
        "-8388608",
        "16777215",
        "-2147483648",
        "4294967295",
        "-9223372036854775808",
        "18446744073709551615",
        "-3.4e38",
        "1.7976931348623157e308",
        "-99999999.99",
        "-99999999999999999999999999999999999.999999999999999999999999999999",
        "99999",
        "'9999-12-31'",
        "'9999-12-31 23:59:59'",
        "'2024-02-29 12:34:56.789'",
        "'1000-01-01 00:00:00.000001'",
        "'2038-01-19 03:14:07.999999'",
        "'1970-01-01 00:00:01'",
        "'838:59:59'",
        "'-838:59:59.0'",
        "'-00:00:01.0001'",
        "'-838:59:59.000001'",
        "2155",
        "'😀 ok'",
        "REPEAT('é', 300)",
        "'multi\\nline \"q\" \\\\'",
        "'ÿé latin'",
        "x'00FF'",
        "x'00010203FFFEFD'",
        "x'DEADBEEF00'",
        "REPEAT(x'AB', 70000)",
        "b'1'",
        "b'1111111111'",
        "b'1111111111111111111111111111111111111111111111111111111111111111'",
        "'b,c'",
        "'x,z'",
        '\'{"k": [1, 2], "s": "é"}\'',
        "REPEAT('m', 70000)",
    ),
    # small / zero / negative
    (
        "127",
        "0",
        "32767",
        "0",
        "8388607",
        "0",
        "2147483647",
        "0",
        "9223372036854775807",
        "0",
        "3.14",
        "-0.5",
        "0.01",
        "0.000000000000000000000000000001",
        "-1",
        "'0000-00-00'",
        "'0000-00-00 00:00:00'",
        "'0000-00-00 00:00:00.000'",
        "'2000-01-01 00:00:00.5'",
        "'1999-12-31 23:59:59.000001'",
        "'2001-02-03 04:05:06'",
        "'00:00:00'",
        "'12:00:00.5'",
        "'23:59:59.9999'",
        "'-12:34:56.789012'",
        "0",
        "''",
        "''",
        "''",
        "'abc'",
        "x'00000000'",
        "x''",
        "x''",
        "x''",
        "b'0'",
        "b'0000000001'",
        "b'1000000000000000000000000000000000000000000000000000000000000000'",
        "'a'",
        "''",
        "'[]'",
        "''",
    ),
    # all NULL
    tuple("NULL" for _ in COLUMNS),
]


def _select_exprs() -> str:
    out = []
    for name, typ in COLUMNS:
        t = typ.split("(")[0].split(" ")[0].upper()
        if t in ("DATE", "DATETIME", "TIMESTAMP", "TIME", "ENUM", "SET"):
            out.append(f"CAST(`{name}` AS CHAR)")
        elif t == "BIT":
            out.append(f"`{name}` + 0")
        elif t == "YEAR":
            out.append(f"`{name}` + 0")
        else:
            out.append(f"`{name}`")
    return ", ".join(out)


def _norm_select(value: object, typ: str) -> object:
    t = typ.split("(")[0].split(" ")[0].upper()
    if value is None:
        return None
    if t == "BIT" or t == "YEAR":
        return int(value)  # type: ignore[call-overload]
    if t == "FLOAT":
        return struct.unpack("<f", struct.pack("<f", float(value)))[0]  # type: ignore[arg-type]
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def test_every_type_decodes_like_select(mariadb: LocalMariaDB, fresh_db: str) -> None:
    cols = ", ".join(f"`{n}` {t}" for n, t in COLUMNS)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.all_types (id INT PRIMARY KEY, {cols})")
    start = head_offset(upstream(mariadb))
    conn = mariadb.connect(fresh_db)
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00', sql_mode = ''")
        for i, row in enumerate(ROWS, start=1):
            cur.execute(f"INSERT INTO all_types VALUES ({i}, {', '.join(row)})")
        cur.execute("UPDATE all_types SET ti = ti WHERE id = 0")  # no-op
        cur.execute("UPDATE all_types SET i = 7, dt6 = '2020-01-01 00:00:00.000001' WHERE id = 1")
        cur.execute("DELETE FROM all_types WHERE id = 3")
        cur.execute(f"SELECT id, {_select_exprs()} FROM all_types ORDER BY id")
        expected = {
            r[0]: tuple(_norm_select(v, COLUMNS[k][1]) for k, v in enumerate(r[1:])) for r in cur.fetchall()
        }
    conn.close()

    changes = read_all(mariadb, start, fresh_db)
    state: dict[int, tuple[object, ...]] = {}
    for ch in changes:
        if ch.op == "D":
            assert ch.before is not None
            state.pop(ch.before[0])
        else:
            assert ch.after is not None
            if ch.op == "U":
                assert ch.before is not None and ch.before[0] in state
                assert ch.before == state[ch.before[0]], "the before image is the full previous row"
            state[ch.after[0]] = ch.after
    assert set(state) == set(expected) == {1, 2}
    for pk, row in state.items():
        got = row[1:]
        for k, (name, typ) in enumerate(COLUMNS):
            assert got[k] == expected[pk][k], (
                f"row {pk} column {name} {typ}: binlog {got[k]!r} != select {expected[pk][k]!r}"
            )
    # Spot checks that the equality above is about the right Python types.
    r1 = state[1][1:]
    names = [c for c, _ in COLUMNS]
    assert r1[names.index("biu")] == 18446744073709551615
    assert isinstance(r1[names.index("dec2")], Decimal)
    assert r1[names.index("tm6")] == "-838:59:59.000001"
    assert r1[names.index("b64")] == 2**64 - 1
    assert isinstance(r1[names.index("bl")], bytes) and isinstance(r1[names.index("txt")], str)
    assert r1[names.index("lat")] == "ÿé latin"
    assert r1[names.index("vc")] == "é" * 300


def test_timestamp_rendered_in_the_changefeed_time_zone(mariadb: LocalMariaDB, fresh_db: str) -> None:
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.tz (id INT PRIMARY KEY, ts TIMESTAMP(6) NULL)")
    start = head_offset(upstream(mariadb))
    conn = mariadb.connect(fresh_db)
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cur.execute("INSERT INTO tz VALUES (1, '2024-06-30 22:30:00.123456')")
    conn.close()
    [utc] = read_all(mariadb, start, fresh_db)
    [shanghai] = read_all(mariadb, start, fresh_db, tz="Asia/Shanghai")
    [offset] = read_all(mariadb, start, fresh_db, tz="-05:30")
    assert utc.after == (1, "2024-06-30 22:30:00.123456")
    assert shanghai.after == (1, "2024-07-01 06:30:00.123456")
    assert offset.after == (1, "2024-06-30 17:00:00.123456")


def test_tables_without_primary_key_and_with_only_a_unique_key(mariadb: LocalMariaDB, fresh_db: str) -> None:
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.nopk (a INT, b VARCHAR(5))",
        f"CREATE TABLE `{fresh_db}`.uk (a INT NULL, b INT NOT NULL, UNIQUE KEY ua (a), UNIQUE KEY ub (b))",
    )
    start = head_offset(upstream(mariadb))
    mariadb.execute(
        f"INSERT INTO `{fresh_db}`.nopk VALUES (1, 'x'), (1, 'x'), (NULL, NULL)",
        f"DELETE FROM `{fresh_db}`.nopk WHERE a = 1 LIMIT 1",
        f"INSERT INTO `{fresh_db}`.uk VALUES (NULL, 1), (2, 2)",
        f"UPDATE `{fresh_db}`.uk SET b = 3 WHERE b = 2",
    )
    changes = read_all(mariadb, start, fresh_db)
    nopk = [c for c in changes if c.table == "nopk"]
    assert [c.op for c in nopk] == ["I", "I", "I", "D"]
    assert nopk[2].after == (None, None) and nopk[3].before == (1, "x")
    uk = [c for c in changes if c.table == "uk"]
    assert [(c.op, c.before, c.after) for c in uk] == [
        ("I", None, (None, 1)),
        ("I", None, (2, 2)),
        ("U", (2, 2), (2, 3)),
    ]
