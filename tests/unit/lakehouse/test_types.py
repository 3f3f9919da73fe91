"""MySQL values to Arrow: every type, NULLs, limits and zero dates."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa

from sparkcdc.model import ColumnInfo, TableInfo
from sparkcdc.sink.lakehouse.types import arrow_fields, arrow_type, column_arrays, widens


def col(t: str, **kw: object) -> ColumnInfo:
    return ColumnInfo("c", t, **kw)  # type: ignore[arg-type]


def test_type_map() -> None:
    assert arrow_type(col("tinyint")) == pa.int32()
    assert arrow_type(col("int")) == pa.int32()
    assert arrow_type(col("int", unsigned=True)) == pa.int64()
    assert arrow_type(col("bigint")) == pa.int64()
    assert arrow_type(col("bigint", unsigned=True)) == pa.decimal128(20, 0)
    assert arrow_type(col("bit", length=64)) == pa.decimal128(20, 0)
    assert arrow_type(col("bit", length=8)) == pa.int64()
    assert arrow_type(col("decimal", precision=65, scale=30)) == pa.string()
    assert arrow_type(col("decimal", precision=38, scale=10)) == pa.decimal128(38, 10)
    assert arrow_type(col("datetime", fsp=6)) == pa.timestamp("us")
    assert arrow_type(col("timestamp")) == pa.timestamp("us", tz="UTC")
    assert arrow_type(col("time")) == pa.string()
    assert arrow_type(col("json")) == pa.string()
    assert arrow_type(col("enum", elements=("a",))) == pa.string()
    assert arrow_type(col("blob")) == pa.binary()
    assert arrow_type(col("year")) == pa.int32()


def test_values_at_their_limits() -> None:
    cols = (
        ColumnInfo("u", "bigint", unsigned=True),
        ColumnInfo("i", "bigint"),
        ColumnInfo("d", "decimal", precision=65, scale=30),
        ColumnInfo("dt", "datetime", fsp=6),
        ColumnInfo("ts", "timestamp", fsp=3),
        ColumnInfo("z", "date"),
        ColumnInfo("b", "varbinary", length=4),
        ColumnInfo("t", "time"),
    )
    info = TableInfo("s", "t", cols)
    big = "9" * 35 + "." + "9" * 30
    rows = [
        (
            2**64 - 1,
            -(2**63),
            Decimal(big),
            "9999-12-31 23:59:59.999999",
            "2038-01-19 03:14:07.999",
            "0000-00-00",
            b"\x00\xff",
            "-838:59:59",
        ),
        None,
        (None,) * 8,
    ]
    arrays = column_arrays(info, rows, arrow_fields(info))
    got = [a.to_pylist() for a in arrays]
    assert got[0] == [Decimal(2**64 - 1), None, None]
    assert got[1][0] == -(2**63)
    assert got[2][0] == big
    assert got[3][0] == dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
    assert got[4][0] == dt.datetime(2038, 1, 19, 3, 14, 7, 999000, tzinfo=dt.UTC)
    assert got[5] == [None, None, None]  # a zero date has no date value
    assert got[6][0] == b"\x00\xff"
    assert got[7][0] == "-838:59:59"


def test_timestamp_in_the_changefeed_time_zone() -> None:
    info = TableInfo("s", "t", (ColumnInfo("ts", "timestamp"),))
    (a,) = column_arrays(info, [("2024-06-01 12:00:00",)], arrow_fields(info), "Asia/Shanghai")
    assert a.to_pylist()[0] == dt.datetime(2024, 6, 1, 4, 0, tzinfo=dt.UTC)


def test_widens() -> None:
    assert widens(pa.int32(), pa.int64())
    assert widens(pa.float32(), pa.float64())
    assert widens(pa.decimal128(10, 2), pa.decimal128(12, 2))
    assert widens(pa.large_string(), pa.string())
    assert not widens(pa.int64(), pa.int32())
    assert not widens(pa.decimal128(10, 2), pa.decimal128(12, 3))
    assert not widens(pa.int32(), pa.string())


def test_bulk_conversion_equals_the_converters() -> None:
    """Arrow's bulk path gives what the per-value converters (the definition) give."""
    from sparkcdc.sink.lakehouse.types import column_array, converter

    cases: list[tuple[ColumnInfo, list[Any]]] = [
        (ColumnInfo("d", "date"), ["2024-02-29", "0000-00-00", "2024-00-10", "9999-12-31", None]),
        (
            ColumnInfo("dt", "datetime", fsp=6),
            ["2024-01-02 03:04:05.123456", "0000-00-00 00:00:00.000000", None],
        ),
        (ColumnInfo("ts", "timestamp", fsp=3), ["2038-01-19 03:14:07.999", "1970-01-01 00:00:01.000", None]),
        (ColumnInfo("u", "bigint", unsigned=True), [2**64 - 1, 0, None]),
        (ColumnInfo("big", "decimal", precision=65, scale=2), [Decimal("-1.50"), None]),
        (ColumnInfo("b", "bit", length=64), [2**63, None]),
        (ColumnInfo("bl", "blob"), [b"\x00\xff", b"", None]),
    ]
    for tz in ("UTC", "Asia/Shanghai"):
        for col, values in cases:
            at = arrow_type(col)
            conv = converter(col, tz)
            want = pa.array([None if v is None or conv is None else conv(v) for v in values], at)
            if conv is None:
                want = pa.array(values, at)
            assert column_array(col, values, at, tz).equals(want), (col.name, tz)


def test_a_decimal_wider_than_the_formats_is_mysqls_text() -> None:
    from sparkcdc.sink.lakehouse.types import column_array

    col = ColumnInfo("w", "decimal", precision=65, scale=30)
    values = [Decimal("1E-30"), Decimal("0E-30"), Decimal("-12345678901234567890123456789012345.5"), None]
    got = column_array(col, values, arrow_type(col), "UTC").to_pylist()
    assert got == [
        "0." + "0" * 29 + "1",
        "0." + "0" * 30,
        "-12345678901234567890123456789012345.5" + "0" * 29,
        None,
    ]
