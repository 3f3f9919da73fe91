"""Table shapes shared by the avro tests."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sparkcdc.model import ColumnInfo, IndexInfo, TableInfo


def person() -> TableInfo:
    """The spec §2 example table."""
    return TableInfo(
        schema="test",
        table="person",
        columns=(
            ColumnInfo("id", "int", nullable=False),
            ColumnInfo("name", "varchar", length=32, charset="utf8mb4"),
            ColumnInfo("ubig", "bigint", unsigned=True, nullable=False, default="0", has_default=True),
            ColumnInfo("price", "decimal", precision=10, scale=2),
            ColumnInfo("b", "bit", length=8),
            ColumnInfo("e", "enum", elements=("a", "b", "c")),
        ),
        indexes=(IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
        version=100,
    )


# (column, a non-null value in RowChange conventions)
ALL_TYPES: list[tuple[ColumnInfo, Any]] = [
    (ColumnInfo("c_tinyint", "tinyint", length=4), -5),
    (ColumnInfo("c_bool", "tinyint", length=1), 1),
    (ColumnInfo("c_utinyint", "tinyint", unsigned=True), 200),
    (ColumnInfo("c_smallint", "smallint"), -32768),
    (ColumnInfo("c_usmallint", "smallint", unsigned=True), 65535),
    (ColumnInfo("c_mediumint", "mediumint"), -8388608),
    (ColumnInfo("c_umediumint", "mediumint", unsigned=True), 16777215),
    (ColumnInfo("c_int", "int"), -2147483648),
    (ColumnInfo("c_uint", "int", unsigned=True), 4294967295),
    (ColumnInfo("c_bigint", "bigint"), -9223372036854775808),
    (ColumnInfo("c_ubigint", "bigint", unsigned=True), 18446744073709551615),
    (ColumnInfo("c_float", "float"), 3.14),
    (ColumnInfo("c_double", "double"), 2.718281828459045),
    (ColumnInfo("c_decimal", "decimal", precision=20, scale=4), Decimal("-1234567890123456.7891")),
    (ColumnInfo("c_decimal_default", "decimal"), Decimal("42")),
    (ColumnInfo("c_date", "date"), "2024-01-02"),
    (ColumnInfo("c_datetime", "datetime", fsp=3), "2024-01-02 03:04:05.678"),
    (ColumnInfo("c_timestamp", "timestamp", fsp=6), "2024-01-02 03:04:05.123456"),
    (ColumnInfo("c_time", "time"), "-838:59:59"),
    (ColumnInfo("c_year", "year"), 2024),
    (ColumnInfo("c_char", "char", length=4, charset="utf8mb4"), "ab"),
    (ColumnInfo("c_varchar", "varchar", length=16, charset="utf8mb4"), "héllo <&>"),
    (ColumnInfo("c_tinytext", "tinytext", charset="utf8mb4"), "t"),
    (ColumnInfo("c_text", "text", charset="utf8mb4"), "text"),
    (ColumnInfo("c_mediumtext", "mediumtext", charset="utf8mb4"), "m"),
    (ColumnInfo("c_longtext", "longtext", charset="utf8mb4"), "l"),
    (ColumnInfo("c_binary", "binary", length=3), b"\x00\x01\xff"),
    (ColumnInfo("c_varbinary", "varbinary", length=8), b"\x01A<"),
    (ColumnInfo("c_tinyblob", "tinyblob"), b"tb"),
    (ColumnInfo("c_blob", "blob"), b"\xfe\xff"),
    (ColumnInfo("c_mediumblob", "mediumblob"), b"mb"),
    (ColumnInfo("c_longblob", "longblob"), b"lb"),
    (ColumnInfo("c_enum", "enum", elements=("x", "y,z", "it's")), "y,z"),
    (ColumnInfo("c_set", "set", elements=("a", "b", "c")), "a,c"),
    (ColumnInfo("c_bit", "bit", length=12), 0b101000001),
    (ColumnInfo("c_bit1", "bit", length=1), 0),
    (ColumnInfo("c_json", "json"), '{"k": [1, 2]}'),
]


def all_types_table() -> TableInfo:
    """One table with a column of every type (plus a NOT NULL primary key)."""
    cols = (ColumnInfo("id", "bigint", nullable=False), *[c for c, _ in ALL_TYPES])
    return TableInfo(
        schema="db",
        table="all_types",
        columns=cols,
        indexes=(IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
        version=7,
    )


def all_types_row(pk: int = 1) -> tuple[Any, ...]:
    """A row of ``all_types_table`` with every value set."""
    return (pk, *[v for _, v in ALL_TYPES])
