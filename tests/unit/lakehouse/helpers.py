"""Shared helpers of the lakehouse unit tests: a table shape, rows and a batch driver."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pyarrow as pa

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.model import ColumnInfo, IndexInfo, RowChange, TableInfo
from sparkcdc.sink import create_sink
from sparkcdc.sink.base import WriterContext
from sparkcdc.sink.lakehouse import LakehouseSink

COLUMNS = (
    ColumnInfo("id", "int", nullable=False),
    ColumnInfo("name", "varchar", length=20),
    ColumnInfo("price", "decimal", precision=10, scale=2),
)
INFO = TableInfo("shop", "items", COLUMNS, (IndexInfo("PRIMARY", ("id",), True, True),), version=1)
CF = "cf-unit"


def row(i: int, name: str = "n", price: str = "1.50") -> tuple[Any, ...]:
    """One row of ``INFO``."""
    return (i, f"{name}{i}", Decimal(price))


def ins(ts: int, r: tuple[Any, ...], seq: int = 0, info: TableInfo = INFO) -> RowChange:
    return RowChange("I", info.schema, info.table, info.version, ts, None, r, seq)


def upd(ts: int, b: tuple[Any, ...], a: tuple[Any, ...], seq: int = 0, info: TableInfo = INFO) -> RowChange:
    return RowChange("U", info.schema, info.table, info.version, ts, b, a, seq)


def dele(ts: int, b: tuple[Any, ...], seq: int = 0, info: TableInfo = INFO) -> RowChange:
    return RowChange("D", info.schema, info.table, info.version, ts, b, None, seq)


def make_sink(uri: str) -> LakehouseSink:
    sink = create_sink(uri, ReplicaConfig(), CF)
    assert isinstance(sink, LakehouseSink)
    sink.check()
    return sink


def run_batch(
    sink: LakehouseSink,
    batch_id: int,
    rows: list[RowChange],
    ts: int,
    info: TableInfo = INFO,
    writers: int = 1,
) -> None:
    """Write ``rows`` through ``writers`` writers (round robin by row) and commit at ``ts``."""
    ws = [sink.open_writer(WriterContext(CF, batch_id, i)) for i in range(writers)]
    for n, r in enumerate(rows):
        ws[n % writers].write(r, info)
    sink.commit(batch_id, [w.close() for w in ws], ts)


def read_table(sink: LakehouseSink, name: str = "shop_items") -> pa.Table:
    """The whole table, read back by the format's own reader."""
    fmt = sink.applier.fmt
    if sink.settings.format == "delta":
        from deltalake import DeltaTable

        return DeltaTable(f"{sink.settings.backend.root}/{name}").to_pyarrow_table()
    return fmt._load(name).scan().to_arrow()  # type: ignore[attr-defined]


def rows_of(t: pa.Table, *cols: str) -> list[tuple[Any, ...]]:
    """The table's rows as tuples of ``cols``, sorted."""
    d = t.select(list(cols)).to_pylist()
    return sorted(tuple(r[c] for c in cols) for r in d)
