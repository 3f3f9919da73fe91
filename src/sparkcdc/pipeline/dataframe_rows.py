"""The rows of the public change stream (``pipeline.dataframe``), decoded on executors as Arrow batches.

``change_batches``: one row per row change (``CHANGE_SCHEMA``), whose ``before``/``after`` are
VARIANTs of the images as canal-json renders them (``pipeline.variant_images``: an object of
column name → value string or null, the ``data``/``old`` objects of a canal-json message).
``typed_batches``: one table's images as its Spark-typed columns (``pipeline.spark_types``).
Both read a segment through ``pipeline.source.iter_segment_batches``, as every changefeed writer does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.types import LongType, StringType, StructField, StructType, VariantType

from sparkcdc.errors import DecodeError, SchemaError
from sparkcdc.model import RowChange, TableInfo
from sparkcdc.pipeline.source import ARROW_BATCH_ROWS, BinlogPartition

CHANGE_SCHEMA = StructType(
    [
        StructField("commit_ts", LongType(), False),
        StructField("seq", LongType(), False),
        StructField("op", StringType(), False),
        StructField("schema", StringType(), False),
        StructField("table", StringType(), False),
        StructField("table_version", LongType(), False),
        StructField("before", VariantType(), True),
        StructField("after", VariantType(), True),
    ]
)
"""The untyped stream: one row per row change; before is null for an INSERT, after for a DELETE."""

OP_NAMES = {"I": "INSERT", "U": "UPDATE", "D": "DELETE"}
"""RowChange.op → the stream's ``op`` (canal-json's ``type``)."""

TIME_ZONE = "UTC"
"""TIMESTAMP values are rendered in UTC (before/after); the typed stream carries the instant."""


def _shape(rows: list[RowChange], info: TableInfo | None) -> TableInfo:
    if info is None:  # the reader resolves a shape for every table map it decodes
        first = rows[0]
        raise DecodeError(
            f"{first.schema}.{first.table}: rows at commit_ts {first.commit_ts} have no table shape"
        )
    return info


def _arrow_schema(schema: StructType) -> Any:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def change_batches(partition: BinlogPartition) -> Iterator[Any]:
    """The untyped rows of a segment as Arrow batches (``CHANGE_SCHEMA``)."""
    import pyarrow as pa

    from sparkcdc.pipeline.source import iter_segment_batches
    from sparkcdc.pipeline.variant_images import ImageVariants

    schema = _arrow_schema(CHANGE_SCHEMA)
    variant = schema.field("before").type
    cols: list[list[Any]] = [[] for _ in range(6)]
    images: list[list[Any]] = [[], []]
    encoders: dict[int, ImageVariants] = {}
    """id(shape) → its variant writer (which keeps the shape, so the id stays its own)."""

    def image_variant(enc: ImageVariants, image: tuple[Any, ...] | None) -> tuple[bytes, bytes] | None:
        return None if image is None else (enc.value(image), enc.metadata)

    def variants(values: list[tuple[bytes, bytes] | None]) -> Any:
        return pa.StructArray.from_arrays(
            [
                pa.array([b"" if v is None else v[0] for v in values], pa.binary()),
                pa.array([b"" if v is None else v[1] for v in values], pa.binary()),
            ],
            fields=list(variant),
            mask=pa.array([v is None for v in values]),
        )

    def batch() -> Any:
        arrays = [pa.array(c, f.type) for c, f in zip(cols, schema, strict=False)]
        out = pa.RecordBatch.from_arrays([*arrays, variants(images[0]), variants(images[1])], schema=schema)
        for c in (*cols, *images):
            c.clear()
        return out

    for rows, info, _own in iter_segment_batches(partition):
        info = _shape(rows, info)
        enc = encoders.get(id(info))
        if enc is None:
            enc = encoders[id(info)] = ImageVariants(info)
        for ev in rows:
            cols[0].append(ev.commit_ts)
            cols[1].append(ev.seq)
            cols[2].append(OP_NAMES[ev.op])
            cols[3].append(ev.schema)
            cols[4].append(ev.table)
            cols[5].append(ev.table_version)
            images[0].append(image_variant(enc, ev.before))
            images[1].append(image_variant(enc, ev.after))
        if len(cols[0]) >= ARROW_BATCH_ROWS:
            yield batch()
    if cols[0]:
        yield batch()


def typed_batches(partition: BinlogPartition, table: TableInfo) -> Iterator[Any]:
    """One table's rows of a segment, typed, as Arrow batches (``spark_types.typed_schema``)."""
    import pyarrow as pa

    from sparkcdc.pipeline.source import iter_segment_batches
    from sparkcdc.pipeline.spark_types import (
        column_signature,
        older_rows_message,
        typed_columns,
        typed_schema,
    )

    schema = _arrow_schema(typed_schema(table))
    signature = column_signature(table)
    chunks: list[list[Any]] = [[] for _ in schema]
    pending = 0
    checked: dict[int, TableInfo] = {}
    """id(shape) → the shape (kept so its id stays its own) of rows whose columns are the stream's."""

    def flush() -> Any:
        out = pa.RecordBatch.from_arrays([pa.concat_arrays(c) for c in chunks], schema=schema)
        for c in chunks:
            c.clear()
        return out

    for rows, info, _own in iter_segment_batches(partition):
        info = _shape(rows, info)
        if id(info) not in checked:
            if column_signature(info) != signature:
                raise SchemaError(older_rows_message(table, info, rows[0].commit_ts))
            checked[id(info)] = info
        arrays = typed_columns(info, rows, schema, OP_NAMES, TIME_ZONE)
        for chunk, array in zip(chunks, arrays, strict=True):
            chunk.append(array)
        pending += len(arrays[0])
        if pending >= ARROW_BATCH_ROWS:
            yield flush()
            pending = 0
    if pending:
        yield flush()
