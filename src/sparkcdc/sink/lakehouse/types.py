"""MySQL column types to Arrow types (and so to Iceberg and Delta types), and row values to Arrow.

Every type maps without loss (see README, "MySQL to Iceberg/Delta"):

===========================================  ======================  ==========================
MySQL                                        Arrow                   Iceberg / Delta
===========================================  ======================  ==========================
TINYINT..INT (signed), TINYINT..MEDIUMINT u  int32                   int / integer
INT UNSIGNED, BIGINT                         int64                   long
BIGINT UNSIGNED, BIT(64)                     decimal128(20, 0)       decimal(20, 0)
BIT(1..63)                                   int64                   long
YEAR                                         int32                   int / integer
FLOAT / DOUBLE                               float32 / float64       float / double
DECIMAL(p,s), p ≤ 38                         decimal128(p, s)        decimal(p, s)
DECIMAL(p,s), p > 38                         string (its text)       string
DATE                                         date32                  date
DATETIME(fsp)                                timestamp[us]           timestamp / timestamp_ntz
TIMESTAMP(fsp)                               timestamp[us, UTC]      timestamptz / timestamp
TIME(fsp)                                    string (``-838:59:59``) string
CHAR, VARCHAR, TEXT, ENUM, SET, JSON         string                  string
BINARY, VARBINARY, BLOB, GEOMETRY            binary                  binary
===========================================  ======================  ==========================

A zero date (``0000-00-00``, or one with a zero month or day) has no value in a date type: it is
written as NULL. Every column is nullable in the table, so that columns can be added and dropped.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.compute as pc

from sparkcdc.codec.values import decimal_text
from sparkcdc.model import ColumnInfo, TableInfo

MAX_DECIMAL_PRECISION = 38
"""Iceberg's and Delta's largest decimal precision."""

_INT32 = frozenset({"tinyint", "smallint", "mediumint"})

Converter = Callable[[Any], Any]


def arrow_type(col: ColumnInfo) -> pa.DataType:
    """The Arrow type a column's values are written as."""
    t = col.type
    if t in _INT32 or t == "year":
        return pa.int32()
    if t == "int":
        return pa.int64() if col.unsigned else pa.int32()
    if t == "bigint":
        return pa.decimal128(20, 0) if col.unsigned else pa.int64()
    if t == "bit":
        return pa.decimal128(20, 0) if (col.length or 1) >= 64 else pa.int64()
    if t == "float":
        return pa.float32()
    if t == "double":
        return pa.float64()
    if t == "decimal":
        p = col.precision if col.precision is not None else 10
        if p > MAX_DECIMAL_PRECISION:
            return pa.string()
        return pa.decimal128(p, col.scale or 0)
    if t == "date":
        return pa.date32()
    if t == "datetime":
        return pa.timestamp("us")
    if t == "timestamp":
        return pa.timestamp("us", tz="UTC")
    if col.is_binary or t == "geometry":
        return pa.binary()
    return pa.string()


def arrow_fields(info: TableInfo, prefix: str = "") -> list[pa.Field]:
    """One nullable Arrow field per column, named ``prefix + name``."""
    return [pa.field(prefix + c.name, arrow_type(c), nullable=True) for c in info.columns]


def _zero_date(text: str) -> bool:
    return text[:4] == "0000" or text[5:7] == "00" or text[8:10] == "00"


def _to_date(v: Any) -> Any:
    if v is None or isinstance(v, dt.date):
        return v
    s = str(v)
    return None if _zero_date(s) else dt.date.fromisoformat(s[:10])


def _to_datetime(v: Any) -> Any:
    if v is None or isinstance(v, dt.datetime):
        return v
    s = str(v)
    return None if _zero_date(s) else dt.datetime.fromisoformat(s)


def _timestamp_converter(time_zone: str) -> Converter:
    zone = dt.UTC if time_zone.upper() in ("UTC", "+00:00", "SYSTEM") else ZoneInfo(time_zone)

    def conv(v: Any) -> Any:
        if v is None:
            return None
        d = v if isinstance(v, dt.datetime) else _to_datetime(v)
        if d is None:
            return None
        if d.tzinfo is None:
            d = d.replace(tzinfo=zone)
        return d.astimezone(dt.UTC)

    return conv


def _to_decimal(v: Any) -> Any:
    return None if v is None else Decimal(v)


def _to_text(v: Any) -> Any:
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8", "surrogateescape")
    return str(v)


def _to_bytes(v: Any) -> Any:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8", "surrogateescape")
    return bytes(v)


def converter(col: ColumnInfo, time_zone: str = "UTC") -> Converter | None:
    """A function from a row value to its Arrow value, or None when the value is taken as it is."""
    at = arrow_type(col)
    if col.type == "date":
        return _to_date
    if col.type == "datetime":
        return _to_datetime
    if col.type == "timestamp":
        return _timestamp_converter(time_zone)
    if pa.types.is_decimal(at):
        return _to_decimal
    if col.type == "decimal":
        # Wider than Iceberg's and Delta's decimals: MySQL's text (str(Decimal) may be 1E-30).
        scale = col.scale or 0
        return lambda v: v if v is None or isinstance(v, str) else decimal_text(v, scale)
    if pa.types.is_string(at):
        return _to_text
    if pa.types.is_binary(at):
        return _to_bytes
    return None


def column_arrays(
    info: TableInfo, images: list[Any], fields: list[pa.Field], time_zone: str = "UTC"
) -> list[pa.Array]:
    """Arrow arrays of the columns of ``images`` (rows in table order; None for a missing image)."""
    out = []
    for i, (col, f) in enumerate(zip(info.columns, fields, strict=True)):
        values = [None if img is None else img[i] for img in images]
        out.append(column_array(col, values, f.type, time_zone))
    return out


_ARROW_REFUSED = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, OverflowError)


def column_array(col: ColumnInfo, values: list[Any], at: pa.DataType, time_zone: str = "UTC") -> pa.Array:
    """One column's values as Arrow: Arrow converts (and parses temporal text) in bulk; values it
    refuses go through ``converter`` one by one, which is the definition of every conversion."""
    try:
        if col.type in ("date", "datetime", "timestamp"):
            return _temporal_array(values, col.type, at, time_zone)
        return pa.array(values, at)
    except _ARROW_REFUSED:
        conv = converter(col, time_zone)
        if conv is None:
            return pa.array(values, at)
        return pa.array([None if v is None else conv(v) for v in values], at)


def _temporal_array(values: list[Any], mysql_type: str, at: pa.DataType, time_zone: str) -> pa.Array:
    """DATE/DATETIME/TIMESTAMP text parsed by Arrow; a zero date (zero year, month or day) is NULL."""
    text = pa.array(values, pa.string())
    zero = pc.or_(
        pc.starts_with(text, "0000"),
        pc.or_(
            pc.equal(pc.utf8_slice_codeunits(text, 5, 7), "00"),
            pc.equal(pc.utf8_slice_codeunits(text, 8, 10), "00"),
        ),
    )
    text = pc.if_else(zero, pa.scalar(None, pa.string()), text)
    if mysql_type == "date":
        return text.cast(pa.date32())
    naive = text.cast(pa.timestamp("us"))
    if mysql_type == "datetime":
        return naive
    if time_zone.upper() not in ("UTC", "+00:00", "SYSTEM"):
        return pc.assume_timezone(naive, time_zone).cast(at)
    return naive.cast(at)


def normal_type(t: pa.DataType) -> pa.DataType:
    """``t`` with large strings and binaries as their plain kind (readers differ in which they return)."""
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    return t


def widens(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether a column of type ``old`` can be promoted to ``new`` in place (Iceberg's promotions)."""
    old, new = normal_type(old), normal_type(new)
    if old == new:
        return True
    if pa.types.is_int32(old) and pa.types.is_int64(new):
        return True
    if pa.types.is_float32(old) and pa.types.is_float64(new):
        return True
    return bool(
        pa.types.is_decimal(old)
        and pa.types.is_decimal(new)
        and old.scale == new.scale
        and new.precision >= old.precision
    )
