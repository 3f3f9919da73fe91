"""Shared renderers: Go float formatting, decimals, ENUM/SET, canal types, split UPDATE."""

from __future__ import annotations

import math
import random
import struct
from decimal import Decimal

import numpy as np
import pytest

from sparkcdc.codec.canal_types import base_type_of, is_binary_mysql_type, java_type, mysql_type
from sparkcdc.codec.values import (
    _shortest64,
    _shortest_exact,
    canal_value,
    decimal_text,
    enum_index,
    enum_name,
    go_format_float,
    go_g_format,
    set_bitmask,
    set_names,
    split_update_if_key_changed,
    to_float32,
)
from sparkcdc.errors import DecodeError
from sparkcdc.model import ColumnInfo, IndexInfo, RowChange, TableInfo

F32_MAX = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0]
F32_MIN_DENORMAL = struct.unpack("<f", struct.pack("<I", 1))[0]

# Outputs of Go's strconv.FormatFloat(v, 'f', -1, bits).
FORMAT_F = [
    (3.14, 64, "3.14"),
    (to_float32(3.14), 32, "3.14"),
    (to_float32(153.123), 32, "153.123"),
    (1e21, 64, "1000000000000000000000"),
    (1e-7, 64, "0.0000001"),
    (0.1, 64, "0.1"),
    (3.0, 64, "3"),
    (-0.0, 64, "-0"),
    (-0.0, 32, "-0"),
    (0.0, 32, "0"),
    (123456789.0, 64, "123456789"),
    (to_float32(16777217.0), 32, "16777216"),
    (to_float32(0.1), 32, "0.1"),
    (F32_MAX, 32, "340282350000000000000000000000000000000"),
    (F32_MIN_DENORMAL, 32, "0." + "0" * 44 + "1"),
    (5e-324, 64, "0." + "0" * 323 + "5"),
    (math.inf, 64, "+Inf"),
    (-math.inf, 32, "-Inf"),
    (math.nan, 64, "NaN"),
]

# Outputs of Go's fmt.Sprintf("%v", v) for float64 / float32 values.
FORMAT_V = [
    (1000000.0, 64, "1e+06"),
    (123456.0, 64, "123456"),
    (1234567.0, 64, "1.234567e+06"),
    (0.0001, 64, "0.0001"),
    (0.00001, 64, "1e-05"),
    (1.5e-5, 64, "1.5e-05"),
    (12345.678, 64, "12345.678"),
    (123.456, 64, "123.456"),
    (3.14, 64, "3.14"),
    (to_float32(3.14), 32, "3.14"),
    (to_float32(153.123), 32, "153.123"),
    (1e21, 64, "1e+21"),
    (1e100, 64, "1e+100"),
    (5e-324, 64, "5e-324"),
    (1.7976931348623157e308, 64, "1.7976931348623157e+308"),
    (F32_MAX, 32, "3.4028235e+38"),
    (F32_MIN_DENORMAL, 32, "1e-45"),
    (-2.5, 64, "-2.5"),
    (0.0, 64, "0"),
    (-0.0, 64, "-0"),
    (100.0, 32, "100"),
    (math.inf, 64, "+Inf"),
    (-math.inf, 64, "-Inf"),
    (math.nan, 32, "NaN"),
]


@pytest.mark.parametrize(("value", "bits", "expected"), FORMAT_F)
def test_go_format_float_matches_go(value: float, bits: int, expected: str) -> None:
    assert go_format_float(value, bits) == expected


@pytest.mark.parametrize(("value", "bits", "expected"), FORMAT_V)
def test_go_g_format_matches_go_percent_v(value: float, bits: int, expected: str) -> None:
    assert go_g_format(value, bits) == expected


def test_float32_shortest_digits_match_dragon4_on_random_values() -> None:
    rng = random.Random(42)
    for _ in range(20000):
        f = np.frombuffer(struct.pack("<I", rng.getrandbits(32)), dtype=np.float32)[0]
        if not np.isfinite(f):
            continue
        expected = np.format_float_positional(f, unique=True, trim="-")
        assert go_format_float(float(f), 32) == expected, float(f)


def test_float32_rendering_round_trips_through_float32() -> None:
    rng = random.Random(7)
    for _ in range(5000):
        v = to_float32(rng.uniform(-1e30, 1e30) * 10 ** rng.randint(-30, 8))
        if math.isinf(v):
            continue
        assert to_float32(float(go_g_format(v, 32))) == v
        assert to_float32(float(go_format_float(v, 32))) == v


def test_exact_shortest_algorithm_agrees_with_python_repr_for_doubles() -> None:
    rng = random.Random(3)
    for _ in range(20000):
        v = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        if math.isnan(v) or math.isinf(v):
            continue
        assert _shortest_exact(v, 64) == _shortest64(v), v


def test_decimal_text_uses_column_scale_and_fixed_notation() -> None:
    assert decimal_text(Decimal("12.5"), 2) == "12.50"
    assert decimal_text(Decimal("0E-10"), 10) == "0.0000000000"
    assert decimal_text(Decimal("1E+3"), 0) == "1000"
    big = Decimal("-12345678901234567890123456789012345.123456789012345678901234567890")
    assert decimal_text(big, 30) == "-12345678901234567890123456789012345.123456789012345678901234567890"
    assert decimal_text(Decimal("7"), None) == "7"
    assert decimal_text(Decimal("1E+2"), None) == "100"
    wide = Decimal("12345678901234567890123456789012345.5")
    assert decimal_text(wide, 30) == "12345678901234567890123456789012345.5" + "0" * 29
    assert decimal_text(Decimal("1.005"), 2) == "1.01"


def test_enum_and_set_conversions_both_ways() -> None:
    e = ColumnInfo("e", "enum", elements=("a", "b,c", "it's"))
    s = ColumnInfo("s", "set", elements=("x", "y", "z"))
    assert [enum_index(e, n) for n in ("", "a", "b,c", "it's")] == [0, 1, 2, 3]
    assert [enum_name(e, i) for i in (0, 1, 2, 3)] == ["", "a", "b,c", "it's"]
    assert set_bitmask(s, "x,z") == 5
    assert set_bitmask(s, "") == 0
    assert set_names(s, 7) == "x,y,z"
    with pytest.raises(DecodeError, match="'q' is not an element of ENUM"):
        enum_index(e, "q")
    with pytest.raises(DecodeError, match="'w' is not an element of SET"):
        set_bitmask(s, "x,w")
    with pytest.raises(DecodeError, match="out of range"):
        set_names(s, 8)
    with pytest.raises(DecodeError, match="out of range"):
        enum_name(e, 4)


def test_canal_value_per_type() -> None:
    assert canal_value(None, ColumnInfo("a", "int")) is None
    assert (
        canal_value(18446744073709551615, ColumnInfo("a", "bigint", unsigned=True)) == "18446744073709551615"
    )
    assert canal_value(to_float32(3.14), ColumnInfo("a", "float")) == "3.14"
    assert canal_value(1e21, ColumnInfo("a", "double")) == "1000000000000000000000"
    assert canal_value(Decimal("12.5"), ColumnInfo("a", "decimal", precision=10, scale=2)) == "12.50"
    assert canal_value(b"\x01A\xff", ColumnInfo("a", "varbinary")) == "\x01A\xff"
    assert canal_value("b", ColumnInfo("a", "enum", elements=("a", "b"))) == "2"
    assert canal_value("x,y", ColumnInfo("a", "set", elements=("x", "y"))) == "3"
    assert canal_value(65, ColumnInfo("a", "bit", length=8)) == "65"
    assert canal_value(2024, ColumnInfo("a", "year")) == "2024"
    assert canal_value("-12:00:00", ColumnInfo("a", "time")) == "-12:00:00"


JAVA_CASES = [
    (ColumnInfo("a", "tinyint"), 1, -6),
    (ColumnInfo("a", "tinyint", length=1), 1, -6),
    (ColumnInfo("a", "tinyint", unsigned=True), 127, -6),
    (ColumnInfo("a", "tinyint", unsigned=True), 128, 5),
    (ColumnInfo("a", "tinyint", unsigned=True), None, -6),
    (ColumnInfo("a", "smallint", unsigned=True), 32767, 5),
    (ColumnInfo("a", "smallint", unsigned=True), 32768, 4),
    (ColumnInfo("a", "mediumint", unsigned=True), 16777215, 4),
    (ColumnInfo("a", "int", unsigned=True), 2147483647, 4),
    (ColumnInfo("a", "int", unsigned=True), 2147483648, -5),
    (ColumnInfo("a", "bigint", unsigned=True), 2**63 - 1, -5),
    (ColumnInfo("a", "bigint", unsigned=True), 2**63, 3),
    (ColumnInfo("a", "bigint", unsigned=True), None, -5),
    (ColumnInfo("a", "int"), 2147483647, 4),
    (ColumnInfo("a", "float"), 1.0, 7),
    (ColumnInfo("a", "double"), 1.0, 8),
    (ColumnInfo("a", "decimal", unsigned=True), Decimal(1), 3),
    (ColumnInfo("a", "date"), "2024-01-01", 91),
    (ColumnInfo("a", "datetime"), "x", 93),
    (ColumnInfo("a", "timestamp"), "x", 93),
    (ColumnInfo("a", "time"), "x", 92),
    (ColumnInfo("a", "year", unsigned=True), 2024, 12),
    (ColumnInfo("a", "char"), "x", 1),
    (ColumnInfo("a", "varchar"), "x", 12),
    (ColumnInfo("a", "tinytext"), "x", 2005),
    (ColumnInfo("a", "text"), "x", 2005),
    (ColumnInfo("a", "mediumtext"), "x", 2005),
    (ColumnInfo("a", "longtext"), "x", 2005),
    (ColumnInfo("a", "binary"), b"x", 2004),
    (ColumnInfo("a", "varbinary"), b"x", 2004),
    (ColumnInfo("a", "tinyblob"), b"x", 2004),
    (ColumnInfo("a", "blob"), b"x", 2004),
    (ColumnInfo("a", "mediumblob"), b"x", 2004),
    (ColumnInfo("a", "longblob"), b"x", 2004),
    (ColumnInfo("a", "enum"), "a", 4),
    (ColumnInfo("a", "set"), "a", -7),
    (ColumnInfo("a", "bit", unsigned=True), 2**64 - 1, -7),
    (ColumnInfo("a", "json"), "{}", 12),
]


@pytest.mark.parametrize(("col", "value", "expected"), JAVA_CASES)
def test_sql_type_with_value_dependent_unsigned_promotion(
    col: ColumnInfo, value: object, expected: int
) -> None:
    assert java_type(col, value) == expected


MYSQL_TYPE_CASES = [
    (ColumnInfo("a", "int"), "int", "int(11)"),
    (ColumnInfo("a", "int", length=11), "int", "int(11)"),
    (ColumnInfo("a", "int", unsigned=True), "int unsigned", "int(10) unsigned"),
    (
        ColumnInfo("a", "int", unsigned=True, zerofill=True, length=10),
        "int unsigned zerofill",
        "int(10) unsigned zerofill",
    ),
    (ColumnInfo("a", "tinyint", length=1), "tinyint", "tinyint(1)"),
    (ColumnInfo("a", "tinyint", unsigned=True), "tinyint unsigned", "tinyint(3) unsigned"),
    (ColumnInfo("a", "smallint"), "smallint", "smallint(6)"),
    (ColumnInfo("a", "mediumint"), "mediumint", "mediumint(9)"),
    (ColumnInfo("a", "bigint"), "bigint", "bigint(20)"),
    (ColumnInfo("a", "bigint", unsigned=True), "bigint unsigned", "bigint(20) unsigned"),
    (ColumnInfo("a", "float"), "float", "float"),
    (ColumnInfo("a", "double", precision=10, scale=3), "double", "double(10,3)"),
    (
        ColumnInfo("a", "double", unsigned=True, zerofill=True),
        "double unsigned zerofill",
        "double unsigned zerofill",
    ),
    (ColumnInfo("a", "decimal"), "decimal", "decimal(10,0)"),
    (
        ColumnInfo("a", "decimal", precision=65, scale=30, unsigned=True),
        "decimal unsigned",
        "decimal(65,30) unsigned",
    ),
    (ColumnInfo("a", "date"), "date", "date"),
    (ColumnInfo("a", "datetime"), "datetime", "datetime"),
    (ColumnInfo("a", "datetime", fsp=6), "datetime", "datetime(6)"),
    (ColumnInfo("a", "timestamp", fsp=3), "timestamp", "timestamp(3)"),
    (ColumnInfo("a", "time", fsp=3), "time", "time(3)"),
    (ColumnInfo("a", "year", length=4, unsigned=True, zerofill=True), "year", "year(4)"),
    (ColumnInfo("a", "char", length=10), "char", "char(10)"),
    (ColumnInfo("a", "varchar", length=32), "varchar", "varchar(32)"),
    (ColumnInfo("a", "text"), "text", "text"),
    (ColumnInfo("a", "longtext"), "longtext", "longtext"),
    (ColumnInfo("a", "binary", length=16), "binary", "binary(16)"),
    (ColumnInfo("a", "varbinary", length=8), "varbinary", "varbinary(8)"),
    (ColumnInfo("a", "blob"), "blob", "blob"),
    (ColumnInfo("a", "mediumblob"), "mediumblob", "mediumblob"),
    (ColumnInfo("a", "enum", elements=("a", "b", "c")), "enum", "enum('a','b','c')"),
    (ColumnInfo("a", "enum", elements=("it's", "a\\b")), "enum", "enum('it''s','a\\\\b')"),
    (ColumnInfo("a", "set", elements=("x", "y")), "set", "set('x','y')"),
    (ColumnInfo("a", "bit", length=8), "bit", "bit(8)"),
    (ColumnInfo("a", "bit", length=8, zerofill=True), "bit", "bit(8) zerofill"),
    (ColumnInfo("a", "json"), "json", "json"),
]


@pytest.mark.parametrize(("col", "bare", "full"), MYSQL_TYPE_CASES)
def test_mysql_type_bare_and_content_compatible(col: ColumnInfo, bare: str, full: str) -> None:
    assert mysql_type(col) == bare
    assert mysql_type(col, full=True) == full


def test_mysql_type_string_helpers() -> None:
    assert base_type_of("int(10) unsigned zerofill") == "int"
    assert base_type_of("varbinary") == "varbinary"
    assert is_binary_mysql_type("varbinary(8)")
    assert is_binary_mysql_type("longblob")
    assert not is_binary_mysql_type("enum('binary','blob')")
    assert not is_binary_mysql_type("text")


def _keyed_table() -> TableInfo:
    return TableInfo(
        "s",
        "t",
        (ColumnInfo("id", "int", nullable=False), ColumnInfo("uk", "varchar"), ColumnInfo("v", "varchar")),
        indexes=(IndexInfo("PRIMARY", ("id",), True, True), IndexInfo("uk", ("uk",), unique=True)),
    )


def test_split_update_when_primary_key_changes() -> None:
    row = RowChange("U", "s", "t", 0, 10, (1, "a", "x"), (2, "a", "x"), seq=4)
    out = split_update_if_key_changed(row, _keyed_table())
    assert [(r.op, r.before, r.after, r.commit_ts, r.seq) for r in out] == [
        ("D", (1, "a", "x"), None, 10, 4),
        ("I", None, (2, "a", "x"), 10, 4),
    ]


def test_split_update_when_unique_key_changes() -> None:
    row = RowChange("U", "s", "t", 0, 10, (1, "a", "x"), (1, "b", "x"))
    assert [r.op for r in split_update_if_key_changed(row, _keyed_table())] == ["D", "I"]


def test_update_of_non_key_column_is_kept() -> None:
    row = RowChange("U", "s", "t", 0, 10, (1, "a", "x"), (1, "a", "y"))
    assert split_update_if_key_changed(row, _keyed_table()) == [row]
    ins = RowChange("I", "s", "t", 0, 10, None, (1, "a", "y"))
    assert split_update_if_key_changed(ins, _keyed_table()) == [ins]


def test_split_uses_not_null_unique_key_as_handle_without_pk() -> None:
    table = TableInfo(
        "s",
        "t",
        (ColumnInfo("code", "varbinary", nullable=False), ColumnInfo("v", "int")),
        indexes=(IndexInfo("uk", ("code",), unique=True),),
    )
    row = RowChange("U", "s", "t", 0, 10, (b"a", 1), (b"b", 1))
    assert [r.op for r in split_update_if_key_changed(row, table)] == ["D", "I"]
