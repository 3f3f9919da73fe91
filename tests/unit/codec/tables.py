"""Tables and rows covering every MySQL type, shared by the codec tests."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sparkcdc.codec.values import to_float32
from sparkcdc.model import ColumnInfo, IndexInfo, RowChange, TableInfo

TS = 429918007904436226  # es 1640007049196

ALL_TYPES = TableInfo(
    schema="test",
    table="all_types",
    columns=(
        ColumnInfo("id", "bigint", unsigned=True, nullable=False),
        ColumnInfo("t_tiny", "tinyint"),
        ColumnInfo("t_utiny", "tinyint", unsigned=True),
        ColumnInfo("t_small", "smallint"),
        ColumnInfo("t_usmall", "smallint", unsigned=True),
        ColumnInfo("t_medium", "mediumint"),
        ColumnInfo("t_umedium", "mediumint", unsigned=True),
        ColumnInfo("t_int", "int"),
        ColumnInfo("t_uint", "int", unsigned=True, zerofill=True),
        ColumnInfo("t_big", "bigint"),
        ColumnInfo("t_float", "float"),
        ColumnInfo("t_double", "double"),
        ColumnInfo("t_dec", "decimal", precision=65, scale=30),
        ColumnInfo("t_date", "date"),
        ColumnInfo("t_datetime", "datetime", fsp=6),
        ColumnInfo("t_ts", "timestamp", fsp=3),
        ColumnInfo("t_time", "time", fsp=2),
        ColumnInfo("t_year", "year"),
        ColumnInfo("t_char", "char", length=10, charset="utf8mb4"),
        ColumnInfo("t_varchar", "varchar", length=64, charset="utf8mb4"),
        ColumnInfo("t_latin1", "varchar", length=64, charset="latin1"),
        ColumnInfo("t_text", "text", charset="utf8mb4"),
        ColumnInfo("t_longtext", "longtext", charset="utf8mb4"),
        ColumnInfo("t_binary", "binary", length=4),
        ColumnInfo("t_varbinary", "varbinary", length=64),
        ColumnInfo("t_blob", "blob"),
        ColumnInfo("t_enum", "enum", elements=("a", "b,c", "it's")),
        ColumnInfo("t_set", "set", elements=("x", "y", "z")),
        ColumnInfo("t_bit", "bit", length=64),
        ColumnInfo("t_json", "json"),
    ),
    indexes=(IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
    version=7,
)


def full_row(i: int = 1) -> tuple[Any, ...]:
    """A row with a non-NULL, awkward value in every column."""
    return (
        18446744073709551615 - i,
        -128,
        255,
        -32768,
        65535,
        -8388608,
        16777215,
        -2147483648,
        4294967295,
        -9223372036854775808,
        to_float32(3.14),
        -1.7976931348623157e308,
        Decimal("-12345678901234567890123456789012345.123456789012345678901234567890"),
        "0000-00-00",
        "9999-12-31 23:59:59.999999",
        "1970-01-01 00:00:01.000",
        "-838:59:59.00",
        2155,
        "ÿé 😀",
        'quote " comma , cr \r lf \n tab \t back \\ <&> \u2028',
        "café naïve",
        "emoji 😀🎉 and 中文",
        "\\N",
        b"\x00\x01\xfe\xff",
        bytes(range(256)),
        b"",
        "it's",
        "x,z",
        18446744073709551615,
        '{"k": [1, 2], "s": "<a&b>"}',
    )


def null_row(i: int = 2) -> tuple[Any, ...]:
    """A row with NULL everywhere but the key."""
    return (i,) + (None,) * (len(ALL_TYPES.columns) - 1)


def small_row(i: int = 3) -> tuple[Any, ...]:
    """Plain small values (zero, empty strings, first elements)."""
    return (
        i,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0.0,
        0.0,
        Decimal("0E-30"),
        "2024-02-29",
        "2024-02-29 12:00:00.000001",
        "2038-01-19 03:14:07.999",
        "00:00:00.00",
        1901,
        "",
        "",
        "",
        "",
        "",
        b"\x00\x00\x00\x00",
        b"\x00",
        b"\n\r,\"'\\",
        "",
        "",
        0,
        "null",
    )


def insert(after: tuple[Any, ...], table: TableInfo = ALL_TYPES, ts: int = TS) -> RowChange:
    """An INSERT row change."""
    return RowChange("I", table.schema, table.table, table.version, ts, None, after)


def update(
    before: tuple[Any, ...], after: tuple[Any, ...], table: TableInfo = ALL_TYPES, ts: int = TS
) -> RowChange:
    """An UPDATE row change."""
    return RowChange("U", table.schema, table.table, table.version, ts, before, after)


def delete(before: tuple[Any, ...], table: TableInfo = ALL_TYPES, ts: int = TS) -> RowChange:
    """A DELETE row change."""
    return RowChange("D", table.schema, table.table, table.version, ts, before, None)
