"""The sink's commit path: staged frames, their cleanup, a lost staged file, DDL before the first rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkcdc.errors import SinkError
from sparkcdc.model import ColumnInfo, DDLEvent, DDLType, TableInfo
from sparkcdc.sink.base import WriterContext
from tests.unit.lakehouse.helpers import CF, INFO, ins, make_sink, read_table, row, rows_of


def test_staged_frames_are_applied_then_removed(tmp_path: Path) -> None:
    sink = make_sink(f"delta://{tmp_path}/root")
    w = sink.open_writer(WriterContext(CF, 5, 0))
    w.write(ins(1, row(1)), INFO)
    msg = w.close()
    staged = [tmp_path / "root" / e["path"] for e in msg["staged"]]
    assert all(p.is_file() for p in staged) and msg["staged"][0]["rows"] == 1
    sink.commit(5, [msg], 1)
    assert not (tmp_path / "root" / "_sparkcdc_staging" / CF / "5").exists()
    assert rows_of(read_table(sink), "id") == [(1,)]


def test_a_lost_staged_file_fails_the_batch(tmp_path: Path) -> None:
    sink = make_sink(f"iceberg://{tmp_path}/wh")
    w = sink.open_writer(WriterContext(CF, 1, 0))
    w.write(ins(1, row(1)), INFO)
    msg = w.close()
    (tmp_path / "wh" / msg["staged"][0]["path"]).unlink()
    with pytest.raises(SinkError, match=r"staged changes .* of table shop.items are missing"):
        sink.commit(1, [msg], 1)


def test_ddl_of_a_table_not_created_yet_waits_for_its_rows(tmp_path: Path) -> None:
    sink = make_sink(f"iceberg://{tmp_path}/wh")
    info = TableInfo("shop", "items", (*INFO.columns, ColumnInfo("qty", "int")), INFO.indexes, version=5)
    sink.apply_ddl(
        DDLEvent("ALTER TABLE items ADD qty INT", "shop", "items", DDLType.ALTER_TABLE, 5, 5, info)
    )
    sink.apply_ddl(DDLEvent("CREATE DATABASE x", "x", "", DDLType.CREATE_SCHEMA, 6, 6))
    assert not sink.applier.fmt.exists("shop_items")
    w = sink.open_writer(WriterContext(CF, 1, 0))
    w.write(ins(7, (*row(1), 9), info=info), info)
    sink.commit(1, [w.close()], 7)
    assert rows_of(read_table(sink), "id", "qty") == [(1, 9)]
