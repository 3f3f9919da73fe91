"""The spool: each snapshot chunk as a parquet file, or as a rendered chunk's entry, in the data dir.

A range task writes its chunks under ``<data dir>/snapshot/rows/<range id>/``: a parquet file of
``SPOOL_COLUMNS`` (one pickled row image per key), or, for a chunk the upstream rendered as CSV
records, the records staged in the storage sink already and a ``RECORDS_SUFFIX`` entry saying where.
The writing step reads the spool back (``spool_rows``, ``spool_frame``) and restages rendered
pieces without the keys the binlog touched after S (``without_touched``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

from sparkcdc.errors import SchemaError
from sparkcdc.model import TableInfo
from sparkcdc.pipeline.snapshot.plan import (
    SNAPSHOT_BATCH_ID,
    RangeState,
    SnapshotJob,
    SnapshotTaskSpec,
    balanced,
)
from sparkcdc.pipeline.spark import map_in_arrow
from sparkcdc.pipeline.state import StateDir, state_dir

SPOOL_COLUMNS = ["schema", "table", "table_version", "key", "payload"]
SPOOL_SCHEMA = "`schema` string, `table` string, table_version long, key string, payload binary"

RECORDS_SUFFIX = ".records.json"
"""The spool entry of a rendered chunk: its staged data files, their record counts and the key's field."""


def write_parquet(
    spool: StateDir, rel: str, schema: str, table: str, version: int, keys: list[str], payloads: list[bytes]
) -> None:
    """Executor: spool one chunk of rows as a parquet file (``SPOOL_COLUMNS``)."""
    import pyarrow as pa

    from sparkcdc.pipeline.arrow_columns import binaries, ints, strings

    n = len(keys)
    t = pa.Table.from_arrays(
        [
            strings([schema] * n),
            strings([table] * n),
            ints([version] * n, pa.int64()),
            strings(keys),
            binaries(payloads),
        ],
        names=SPOOL_COLUMNS,
    )
    spool.write_parquet(rel, t)


def stage_chunk(spec: SnapshotTaskSpec, st: RangeState, info: TableInfo, base: str, chunk: Any) -> None:
    """Write a rendered chunk as staged data files of the snapshot batch; the spool records where they are."""
    from sparkcdc.codec.csv_sql import split_records
    from sparkcdc.sink.storage.writer import cut_records, stage_records

    sink, csv = spec.sink, spec.rendered["csv"]
    file_size = sink.settings.file_size
    pieces = [(chunk.records, chunk.rows)]
    if len(chunk.records) > file_size:
        records = split_records(chunk.records, csv["quote"].encode(), csv["terminator"].encode())
        pieces = cut_records(records, file_size)
    name = f"r{st.range_id}-e{spec.epoch}-{st.rows_copied:012d}"
    staged = stage_records(
        sink.settings, sink.changefeed_id, SNAPSHOT_BATCH_ID, name, info, info.version, pieces
    )
    meta = {
        "schema": st.schema,
        "table": st.table,
        "table_version": info.version,
        "key_field": spec.rendered[f"{st.schema}\x00{st.table}"]["key_field"],
        "key_head": spec.rendered[f"{st.schema}\x00{st.table}"]["key_head"],
        "pieces": [{"entry": entry, "rows": count} for entry, count in staged],
        "csv": csv,
    }
    state_dir(spec.spool_dir).write_json(base + RECORDS_SUFFIX, meta)


def spool_rows(
    spool_dir: str, files: list[str], touched: set[tuple[str, str, str]]
) -> Iterator[tuple[str, str, int, bytes]]:
    """Executor: ``(schema, table, table_version, payload)`` of spooled rows whose key was not touched."""
    spool = state_dir(spool_dir)
    for rel in files:
        t = spool.read_parquet(rel)
        cols = [t.column(c).to_pylist() for c in ("schema", "table", "table_version", "key", "payload")]
        for schema, table, version, key, payload in zip(*cols, strict=True):
            if (schema, table, key) not in touched:
                yield schema, table, version, payload


def without_touched(
    sink: Any,
    spool_dir: str,
    path: str,
    piece: int,
    touched: set[tuple[str, str, str]],
    shapes: dict[tuple[str, str], TableInfo],
) -> dict[str, Any]:
    """Executor: stage one piece of a rendered chunk again without the records of touched keys.

    The new files have new names, so a retried task finds the original piece unchanged.
    """
    from sparkcdc.codec.csv_sql import ServerCSV, record_keys, split_records
    from sparkcdc.sink.storage.writer import cut_records, stage_records

    meta = state_dir(spool_dir).read_json(path)
    if meta is None:
        raise SchemaError(f"the spooled entry {path} of the snapshot is missing from the data dir")
    schema, table = meta["schema"], meta["table"]
    entry = meta["pieces"][piece]["entry"]
    data = sink.settings.backend.read(entry[4])
    if data is None:
        raise SchemaError(f"the staged snapshot file {entry[4]} of {schema}.{table} is missing")
    server = ServerCSV(**meta["csv"])
    records = split_records(data, server.quote.encode(), server.terminator.encode())
    keys = record_keys(records, server.decoder(), int(meta["key_field"]), meta["key_head"])
    kept = [r for r, k in zip(records, keys, strict=True) if (schema, table, k) not in touched]
    name = os.path.basename(entry[4]).rsplit(".", 1)[0] + "-kept"
    staged = (
        stage_records(
            sink.settings,
            sink.changefeed_id,
            SNAPSHOT_BATCH_ID,
            name,
            shapes[(schema, table)],
            int(meta["table_version"]),
            cut_records(kept, sink.settings.file_size),
        )
        if kept
        else []
    )
    return {"staged": [e for e, _ in staged], "rows": len(kept)}


def spool_size(job: SnapshotJob, rel: str) -> int:
    """The size of a spooled file (it must exist)."""
    size = job.spool.size(rel)
    if size is None:
        raise SchemaError(f"the spooled file {job.spool.join_display(rel)} is missing from the data dir")
    return size


def spool_frame(job: SnapshotJob, files: list[str]) -> Any:
    """The spooled chunks as a DataFrame, read by executors from the data dir (any storage it is on)."""
    spark = job.spark
    if not files:
        return spark.createDataFrame([], SPOOL_SCHEMA)
    groups = balanced([(spool_size(job, f), f) for f in files], min(len(files), 2 * job.task_slots()))
    spool_dir = job.spool_dir

    def read(batches: Iterable[Any]) -> Iterator[Any]:
        spool = state_dir(spool_dir)
        for b in batches:
            for rel in b.column(0).to_pylist():
                yield from spool.read_parquet(rel).select(SPOOL_COLUMNS).to_batches()

    names = spark.createDataFrame([(f,) for g in groups for f in g], "file string")
    # One partition per group of files of similar size.
    return map_in_arrow(names.repartition(len(groups)), read, SPOOL_SCHEMA)
