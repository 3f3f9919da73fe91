"""A table's columns as Spark types: the typed stream of ``format("sparkcdc").option("table", …)``.

Each MySQL column type maps to the Spark type that holds every value of it without loss
(``spark_type``), and ``value_converter`` turns the row image value ``ColumnInfo`` documents
into that type's Python value. A value the Spark type cannot hold (a zero date) is an error
that names the column and the value, never a silent NULL.

| MySQL                         | Spark                                  |
|-------------------------------|----------------------------------------|
| TINYINT / SMALLINT / MEDIUMINT / INT / BIGINT | byte / short / int / int / long; UNSIGNED one size up, BIGINT UNSIGNED decimal(20,0) |
| YEAR                          | short                                  |
| BIT(M)                        | long (M ≤ 63), decimal(20,0) (M = 64)  |
| FLOAT / DOUBLE                | float / double                         |
| DECIMAL(P,S)                  | decimal(P,S) (P ≤ 38), else string (MySQL's text) |
| DATE                          | date                                   |
| DATETIME                      | timestamp_ntz                          |
| TIMESTAMP                     | timestamp (the instant)                |
| TIME                          | string (``-838:59:59`` … ``838:59:59``) |
| CHAR, VARCHAR, TEXT, ENUM, SET, JSON | string (ENUM/SET: the element names) |
| BINARY, VARBINARY, BLOB, GEOMETRY | binary                             |
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from pyspark.sql.types import (
    BinaryType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from sparkcdc.codec.values import decimal_text
from sparkcdc.errors import DecodeError, SchemaError
from sparkcdc.model.schema import BLOB_TYPES, ColumnInfo, TableInfo

OP_COLUMN = "_op"
"""The typed stream's change kind: INSERT, UPDATE or DELETE (canal-json's ``type``)."""
COMMIT_TS_COLUMN = "_commit_ts"
"""The typed stream's commit_ts."""

_SIGNED: dict[str, DataType] = {
    "tinyint": ByteType(),
    "smallint": ShortType(),
    "mediumint": IntegerType(),
    "int": IntegerType(),
    "bigint": LongType(),
}
_UNSIGNED: dict[str, DataType] = {
    "tinyint": ShortType(),
    "smallint": IntegerType(),
    "mediumint": IntegerType(),
    "int": LongType(),
    "bigint": DecimalType(20, 0),
}
_STRING_TYPES = frozenset(
    {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json", "time"}
)


def spark_type(col: ColumnInfo) -> DataType:
    """The Spark type that holds every value of ``col``."""
    t = col.type
    if t in _SIGNED:
        return _UNSIGNED[t] if col.unsigned else _SIGNED[t]
    if t == "year":
        return ShortType()
    if t == "bit":
        return DecimalType(20, 0) if (col.length or 1) >= 64 else LongType()
    if t == "float":
        return FloatType()
    if t == "double":
        return DoubleType()
    if t == "decimal":
        precision = col.precision if col.precision is not None else 10
        return DecimalType(precision, col.scale or 0) if precision <= 38 else StringType()
    if t == "date":
        return DateType()
    if t == "datetime":
        return TimestampNTZType()
    if t == "timestamp":
        return TimestampType()
    if t in _STRING_TYPES:
        return StringType()
    if t in BLOB_TYPES or t == "geometry":
        return BinaryType()
    raise SchemaError(f"column {col.name!r} has the type {t!r}, which the typed source does not map to Spark")


def typed_schema(info: TableInfo) -> StructType:
    """The typed stream's schema: the table's columns in order, then ``_op`` and ``_commit_ts``."""
    for c in info.columns:
        if c.name.lower() in (OP_COLUMN, COMMIT_TS_COLUMN):
            raise SchemaError(
                f"table {info.schema}.{info.table} has a column named {c.name!r}, which the typed source "
                "adds itself; read the untyped stream (leave out option table)"
            )
    fields = [StructField(c.name, spark_type(c), True) for c in info.columns]
    fields.append(StructField(OP_COLUMN, StringType(), False))
    fields.append(StructField(COMMIT_TS_COLUMN, LongType(), False))
    return StructType(fields)


def column_signature(info: TableInfo) -> list[tuple[str, str]]:
    """(name, Spark type) of each column: two shapes with equal signatures give the same typed rows."""
    return [(c.name, spark_type(c).simpleString()) for c in info.columns]


def changed_columns_message(table: TableInfo, now: TableInfo, ts: int, what: str) -> str:
    """Why a typed stream stops: ``table`` has other columns from ``ts`` on (``what`` changed them)."""

    def listed(info: TableInfo) -> str:
        return ", ".join(f"{n} {t}" for n, t in column_signature(info))

    return (
        f"table {table.schema}.{table.table} changed its columns at commit_ts {ts} ({what}): the typed "
        f"stream has ({listed(table)}), the table now ({listed(now)}). A typed stream keeps its columns: "
        f"start a new query (a new checkpointLocation and data-dir) with option start-ts={ts}, or read "
        "the untyped stream (leave out option table)"
    )


def older_rows_message(table: TableInfo, rows: TableInfo, ts: int) -> str:
    """Why a typed stream stops at rows written with other columns than the ones it took at its first start."""

    def listed(info: TableInfo) -> str:
        return ", ".join(f"{n} {t}" for n, t in column_signature(info))

    return (
        f"rows of {table.schema}.{table.table} at commit_ts {ts} have the columns ({listed(rows)}), the "
        f"typed stream ({listed(table)}): its start-ts lies before a DDL that changed the table, and a typed "
        "stream has the columns the table had when the query first started. Start a new query (a new "
        "checkpointLocation and data-dir) with a start-ts after that DDL, or read the untyped stream "
        "(leave out option table)"
    )


def _zero_error(info: TableInfo, col: ColumnInfo, v: Any) -> DecodeError:
    return DecodeError(
        f"{info.schema}.{info.table}.{col.name}: {v!r} is not a valid {col.type.upper()} for Spark (MySQL "
        "zero dates have no Spark value); read the untyped stream (leave out option table), whose "
        "before/after keep MySQL's text"
    )


def value_converter(info: TableInfo, col: ColumnInfo, time_zone: str) -> Callable[[Any], Any] | None:
    """The function from ``col``'s row-image value to its Spark value (None: the value is kept as is)."""
    target = spark_type(col)
    if isinstance(target, DecimalType) and col.type in ("bigint", "bit"):
        return Decimal
    if col.type == "decimal" and isinstance(target, StringType):
        scale = col.scale

        def decimal_string(v: Any) -> Any:
            return decimal_text(v, scale) if isinstance(v, Decimal) else v

        return decimal_string
    if col.type == "date":

        def to_date(v: Any) -> Any:
            try:
                return dt.date.fromisoformat(v)
            except ValueError:
                raise _zero_error(info, col, v) from None

        return to_date
    if col.type == "datetime":

        def to_datetime(v: Any) -> Any:
            try:
                return dt.datetime.fromisoformat(v)
            except ValueError:
                raise _zero_error(info, col, v) from None

        return to_datetime
    if col.type == "timestamp":
        zone = ZoneInfo(time_zone)

        def to_instant(v: Any) -> Any:
            try:
                return dt.datetime.fromisoformat(v).replace(tzinfo=zone)
            except ValueError:
                raise _zero_error(info, col, v) from None

        return to_instant
    return None


class TypedRows:
    """Row images of one table shape → the typed stream's columns."""

    def __init__(self, info: TableInfo, time_zone: str) -> None:
        self.info = info
        self.converters = [value_converter(info, c, time_zone) for c in info.columns]

    def columns(self, images: list[tuple[Any, ...]]) -> list[list[Any]]:
        """The images as one list of Spark values per table column."""
        out: list[list[Any]] = []
        for i, conv in enumerate(self.converters):
            if conv is None:
                out.append([img[i] for img in images])
            else:
                out.append([None if (v := img[i]) is None else conv(v) for img in images])
        return out
