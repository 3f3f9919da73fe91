"""A table's columns as Spark types: the typed stream of ``format("sparkcdc").option("table", …)``.

The MySQL-to-Arrow mapping and the conversion of row values are the lakehouse sinks'
(``sink.lakehouse.types``): a typed stream has the column types an Iceberg or Delta table of
the same upstream table has. This module names the Spark type of each Arrow type, builds the
stream's schema (the columns, then ``_op``, ``_commit_ts`` and ``_seq``) and its Arrow columns,
and says when a table's columns stop matching the stream's.

| MySQL                                          | Spark                                    |
|------------------------------------------------|------------------------------------------|
| TINYINT, SMALLINT, MEDIUMINT (either sign), INT, YEAR | int                               |
| INT UNSIGNED, BIGINT, BIT(1..63)               | long                                     |
| BIGINT UNSIGNED, BIT(64)                       | decimal(20,0)                            |
| FLOAT / DOUBLE                                 | float / double                           |
| DECIMAL(P,S)                                   | decimal(P,S) (P ≤ 38), else string       |
| DATE / DATETIME / TIMESTAMP                    | date / timestamp_ntz / timestamp (a zero date: NULL) |
| TIME, CHAR, VARCHAR, TEXT, ENUM, SET, JSON     | string                                   |
| UUID, INET4, INET6 (MariaDB)                   | string (the text MariaDB prints)         |
| BINARY, VARBINARY, BLOB, GEOMETRY              | binary                                   |
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_type
from pyspark.sql.types import DataType, LongType, StringType, StructField, StructType, TimestampNTZType

from sparkcdc.errors import SchemaError
from sparkcdc.model import RowChange
from sparkcdc.model.schema import ColumnInfo, TableInfo
from sparkcdc.sink.lakehouse.types import arrow_type, column_arrays

OP_COLUMN = "_op"
"""The typed stream's change kind: INSERT, UPDATE or DELETE (canal-json's ``type``)."""
COMMIT_TS_COLUMN = "_commit_ts"
"""The typed stream's commit_ts."""
SEQ_COLUMN = "_seq"
"""The change's place in its transaction: (_commit_ts, _seq) orders the typed stream."""


def spark_type(col: ColumnInfo) -> DataType:
    """The Spark type of ``col``'s values (that of its lakehouse Arrow type)."""
    at = arrow_type(col)
    if pa.types.is_timestamp(at) and at.tz is None:
        return TimestampNTZType()  # DATETIME: a wall-clock time, whatever the session's timestampType
    return from_arrow_type(at)


def typed_schema(info: TableInfo) -> StructType:
    """The typed stream's schema: the table's columns in order, then ``_op``, ``_commit_ts`` and ``_seq``."""
    for c in info.columns:
        if c.name.lower() in (OP_COLUMN, COMMIT_TS_COLUMN, SEQ_COLUMN):
            raise SchemaError(
                f"table {info.schema}.{info.table} has a column named {c.name!r}, which the typed source "
                "adds itself; read the untyped stream (leave out option table)"
            )
    fields = [StructField(c.name, spark_type(c), True) for c in info.columns]
    fields.append(StructField(OP_COLUMN, StringType(), False))
    fields.append(StructField(COMMIT_TS_COLUMN, LongType(), False))
    fields.append(StructField(SEQ_COLUMN, LongType(), False))
    return StructType(fields)


def column_signature(info: TableInfo) -> list[tuple[str, str]]:
    """(name, Spark type) of each column: two shapes with equal signatures give the same typed rows."""
    return [(c.name, spark_type(c).simpleString()) for c in info.columns]


def split_key_change(ev: RowChange, handle: tuple[int, ...]) -> list[RowChange]:
    """An UPDATE that changes the handle key (primary, else NOT NULL unique key) as DELETE + INSERT."""
    if ev.op != "U" or not handle or ev.before is None or ev.after is None:
        return [ev]
    before, after = ev.before, ev.after
    if all(before[i] == after[i] for i in handle):
        return [ev]
    return [replace(ev, op="D", after=None), replace(ev, op="I", before=None)]


def typed_columns(
    info: TableInfo, rows: list[RowChange], schema: Any, op_names: dict[str, str], time_zone: str
) -> list[Any]:
    """Arrow arrays of ``rows`` in the typed stream's Arrow ``schema``: a DELETE carries the deleted row.

    An UPDATE that moves a row to another handle key is a DELETE of the old key and an INSERT of
    the new one (``split_key_change``, with the same _commit_ts and _seq), so that the rows alone
    rebuild the table by key.
    """
    handle = info.handle_key_index
    rows = [part for ev in rows for part in split_key_change(ev, handle)]
    fields = list(schema)
    arrays = column_arrays(info, [ev.image for ev in rows], fields[:-3], time_zone)
    arrays.append(pa.array([op_names[ev.op] for ev in rows], fields[-3].type))
    arrays.append(pa.array([ev.commit_ts for ev in rows], fields[-2].type))
    arrays.append(pa.array([ev.seq for ev in rows], fields[-1].type))
    return arrays


def _listed(info: TableInfo) -> str:
    return ", ".join(f"{n} {t}" for n, t in column_signature(info))


def changed_columns_message(table: TableInfo, now: TableInfo, ts: int, what: str) -> str:
    """Why a typed stream stops: ``table`` has other columns from ``ts`` on (``what`` changed them)."""
    return (
        f"table {table.schema}.{table.table} changed its columns at commit_ts {ts} ({what}): the typed "
        f"stream has ({_listed(table)}), the table now ({_listed(now)}). A typed stream keeps its columns: "
        f"start a new query (a new checkpointLocation and data-dir) with option start-ts={ts}, or read "
        "the untyped stream (leave out option table)"
    )


def older_rows_message(table: TableInfo, rows: TableInfo, ts: int) -> str:
    """Why a typed stream stops at rows written with other columns than the ones it took at its first start."""
    return (
        f"rows of {table.schema}.{table.table} at commit_ts {ts} have the columns ({_listed(rows)}), the "
        f"typed stream ({_listed(table)}): its start-ts lies before a DDL that changed the table, and a typed "
        "stream has the columns the table had when the query first started. Start a new query (a new "
        "checkpointLocation and data-dir) with a start-ts after that DDL, or read the untyped stream "
        "(leave out option table)"
    )
