"""Routing of a batch's rows to writer groups (the executor-side functions, without Spark)."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.model import ColumnInfo, IndexInfo, RowChange, TableInfo
from sparkcdc.pipeline.serde import COLUMNS, dump_images
from sparkcdc.pipeline.writer import RouteWriters, make_router, make_writer
from sparkcdc.sink.base import PartitionWriter, Sink, SinkCapabilities, WriterContext


def _table(name: str) -> TableInfo:
    return TableInfo(
        "s",
        name,
        (ColumnInfo("id", "int", nullable=False), ColumnInfo("v", "varchar")),
        (IndexInfo("PRIMARY", ("id",), True, True),),
        version=1,
    )


TABLES = {("s", "a"): _table("a").to_dict(), ("s", "b"): _table("b").to_dict()}


class RecordingSink(Sink):
    """A sink that routes by the row's id (or its table) and records what it was given."""

    def __init__(self, per_row: bool) -> None:
        super().__init__("test://", ReplicaConfig())
        self.per_row = per_row
        self.route_calls = 0
        self.written: dict[int, list[tuple[str, int]]] = {}

    @property
    def capabilities(self) -> SinkCapabilities:
        return SinkCapabilities(route_depends_on_row=self.per_row)

    @property
    def num_writers(self) -> int:
        return 4

    def route(self, row: RowChange, table: TableInfo) -> int:
        self.route_calls += 1
        return row.image[0] % 4 if self.per_row else (0 if row.table == "a" else 3)

    def open_writer(self, ctx: WriterContext) -> PartitionWriter:
        sink = self

        class W(PartitionWriter):
            def write(self, row: RowChange, table: TableInfo) -> None:
                sink.written.setdefault(ctx.writer_id, []).append((row.table, row.image[0]))

            def close(self) -> dict[str, Any]:
                return {"ok": True}

        return W()


def _batch() -> pa.RecordBatch:
    rows = [("a" if i % 3 else "b", i) for i in range(12)]
    cols: list[list[Any]] = [
        [100 + i for i in range(12)],
        list(range(12)),
        ["I"] * 12,
        ["s"] * 12,
        [t for t, _ in rows],
        [1] * 12,
        [dump_images(None, (i, "x"), None) for _, i in rows],
    ]
    return pa.RecordBatch.from_arrays([pa.array(c) for c in cols], names=list(COLUMNS))


def test_a_table_determined_route_decodes_one_row_per_table() -> None:
    sink = RecordingSink(per_row=False)
    [out] = list(make_router(sink, TABLES)(iter([_batch()])))
    routes = out.column("route").to_pylist()
    tables = out.column("table").to_pylist()
    assert routes == [0 if t == "a" else 3 for t in tables]
    assert sink.route_calls == 2, "one route() call per table, not per row"


def test_a_row_determined_route_looks_at_every_row() -> None:
    sink = RecordingSink(per_row=True)
    [out] = list(make_router(sink, TABLES)(iter([_batch()])))
    assert out.column("route").to_pylist() == [i % 4 for i in range(12)]
    assert sink.route_calls == 12


def test_the_writer_routes_rows_itself_when_the_batch_has_no_route_column() -> None:
    sink = RecordingSink(per_row=False)
    msgs = list(make_writer(sink, TABLES, "cf", 7)(iter([_batch()])))
    assert len(msgs) == 1 and msgs[0].num_rows == 2  # one commit message per writer group
    assert sorted(sink.written) == [0, 3]
    assert [i for _, i in sink.written[0]] == [i for i in range(12) if i % 3]
    assert [i for _, i in sink.written[3]] == [i for i in range(12) if i % 3 == 0]


def _rows(table: str, ids: range) -> list[RowChange]:
    return [RowChange("I", "s", table, 1, 100, None, (i, "x"), i) for i in ids]


def test_write_rows_routes_a_table_run_once_and_keeps_the_order() -> None:
    sink = RecordingSink(per_row=False)
    out = RouteWriters(sink, TABLES, "cf", 0)
    out.write_rows(_rows("a", range(5)), _table("a"))
    out.write_rows(_rows("b", range(5, 8)), _table("b"))
    out.write_rows(_rows("a", range(8, 10)), _table("a"))
    assert sink.route_calls == 2, "one route() call per table"
    assert sink.written == {0: [("a", i) for i in (0, 1, 2, 3, 4, 8, 9)], 3: [("b", 5), ("b", 6), ("b", 7)]}
    assert {json.loads(m)["route"]: json.loads(m)["rows"] for m in out.close()} == {0: 7, 3: 3}


def test_write_rows_routes_each_row_when_the_route_depends_on_the_row() -> None:
    sink = RecordingSink(per_row=True)
    out = RouteWriters(sink, TABLES, "cf", 0)
    out.write_rows(_rows("a", range(8)), _table("a"))
    assert sink.route_calls == 8
    assert sink.written == {r: [("a", i) for i in range(8) if i % 4 == r] for r in range(4)}
    assert sum(json.loads(m)["rows"] for m in out.close()) == 8
