"""The apply-changes core on both formats: upsert, changelog, replays, DDL."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from sparkcdc.errors import SinkError
from sparkcdc.model import ColumnInfo, DDLEvent, DDLType, IndexInfo, TableInfo
from sparkcdc.sink.lakehouse.changes import ChangeFrame, last_per_key, renamed_columns
from tests.unit.lakehouse.helpers import (
    COLUMNS,
    INFO,
    dele,
    ins,
    make_sink,
    read_table,
    row,
    rows_of,
    run_batch,
    upd,
)

FORMATS = ("delta", "iceberg")


def test_upsert_frame_keeps_the_last_change_per_key() -> None:
    f = ChangeFrame(INFO, "upsert")
    f.add(ins(1, row(1)))
    f.add(ins(1, row(2), 1))
    f.add(upd(2, row(2), row(3)))  # the key changes: 2 is deleted, 3 written
    f.add(upd(3, row(1), row(1, "x")))
    f.add(dele(4, row(3)))
    t = f.to_arrow()
    got = {r["id"]: (r["name"], r["_sparkcdc_deleted"]) for r in t.to_pylist()}
    assert got == {1: ("x1", False), 2: ("n2", True), 3: ("n3", True)}


def test_last_per_key_across_writers() -> None:
    a, b = ChangeFrame(INFO, "upsert"), ChangeFrame(INFO, "upsert")
    a.add(ins(1, row(1)))
    b.add(upd(2, row(1), row(1, "late")))
    a.add(ins(3, row(2)))
    merged = last_per_key(pa.concat_tables([a.to_arrow(), b.to_arrow()]), ("id",))
    assert sorted((r["id"], r["name"]) for r in merged.to_pylist()) == [(1, "late1"), (2, "n2")]


def test_renamed_columns() -> None:
    assert renamed_columns("ALTER TABLE t RENAME COLUMN `a` TO `b`") == [("a", "b")]
    assert renamed_columns("alter table t change column a b int") == [("a", "b")]
    assert renamed_columns("ALTER TABLE t CHANGE a a BIGINT") == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_upsert_mirrors_and_a_replay_is_skipped(fmt: str, tmp_path: Path) -> None:
    sink = make_sink(f"{fmt}://{tmp_path}/wh")
    run_batch(sink, 0, [ins(10, row(1)), ins(10, row(2), 1), ins(10, row(3), 2)], 10)
    batch1 = [
        upd(11, row(1), row(1, "u")),
        dele(11, row(2), 1),
        upd(12, row(3), row(30)),
        ins(12, row(2, "again"), 1),
    ]
    run_batch(sink, 1, batch1, 12, writers=2)
    want = [(1, "u1"), (2, "again2"), (30, "n30")]
    assert rows_of(read_table(sink), "id", "name") == want
    run_batch(sink, 1, batch1, 12)  # replayed after a crash: already committed
    assert rows_of(read_table(sink), "id", "name") == want
    sink.close()


@pytest.mark.parametrize("fmt", FORMATS)
def test_changelog_appends_every_change_once(fmt: str, tmp_path: Path) -> None:
    sink = make_sink(f"{fmt}://{tmp_path}/wh?mode=changelog")
    run_batch(sink, 0, [ins(10, row(1)), upd(11, row(1), row(1, "u")), dele(12, row(1, "u"))], 12)
    run_batch(sink, 0, [ins(10, row(1)), upd(11, row(1), row(1, "u")), dele(12, row(1, "u"))], 12)
    t = read_table(sink)
    assert rows_of(t, "_commit_ts", "_op", "id", "name", "_before_name") == [
        (10, "I", 1, "n1", None),
        (11, "U", 1, "u1", "n1"),
        (12, "D", 1, "u1", "u1"),
    ]
    sink.close()


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_batch_planned_again_across_the_tag_appends_only_its_newer_rows(fmt: str, tmp_path: Path) -> None:
    """After a failover the batches are cut anew: one may start below the table's tag and end above it."""
    sink = make_sink(f"{fmt}://{tmp_path}/wh?mode=changelog")
    run_batch(sink, 0, [ins(10, row(1)), upd(11, row(1), row(1, "u"))], 11)
    run_batch(
        sink, 0, [ins(10, row(1)), upd(11, row(1), row(1, "u")), ins(12, row(2)), dele(13, row(1, "u"))], 13
    )
    assert rows_of(read_table(sink), "_commit_ts", "_op", "id") == [
        (10, "I", 1),
        (11, "U", 1),
        (12, "I", 2),
        (13, "D", 1),
    ]
    sink.close()


@pytest.mark.parametrize("fmt", FORMATS)
def test_ddl_evolves_the_table(fmt: str, tmp_path: Path) -> None:
    sink = make_sink(f"{fmt}://{tmp_path}/wh")
    run_batch(sink, 0, [ins(10, row(1)), ins(10, row(2), 1)], 10)

    def alter(query: str, ts: int, cols: tuple[ColumnInfo, ...]) -> TableInfo:
        info = TableInfo("shop", "items", cols, INFO.indexes, version=ts)
        sink.apply_ddl(DDLEvent(query, "shop", "items", DDLType.ALTER_TABLE, ts, ts, info))
        sink.apply_ddl(DDLEvent(query, "shop", "items", DDLType.ALTER_TABLE, ts, ts, info))  # replayed
        return info

    cols: tuple[ColumnInfo, ...] = (*COLUMNS, ColumnInfo("qty", "int"))
    info = alter("ALTER TABLE items ADD COLUMN qty INT", 20, cols)
    cols = (ColumnInfo("id", "int", nullable=False), ColumnInfo("title", "varchar", length=20), *cols[2:])
    info = alter("ALTER TABLE items RENAME COLUMN name TO title", 21, cols)
    cols = (*cols[:2], ColumnInfo("price", "decimal", precision=12, scale=2), ColumnInfo("qty", "bigint"))
    info = alter("ALTER TABLE items MODIFY price DECIMAL(12,2), MODIFY qty BIGINT", 22, cols)
    cols = (cols[0], cols[1], cols[3])
    info = alter("ALTER TABLE items DROP COLUMN price", 23, cols)
    run_batch(sink, 1, [ins(30, (3, "t3", 2**40))], 30, info)
    t = read_table(sink)
    assert t.schema.names == ["id", "title", "qty"]
    assert pa.types.is_int64(t.schema.field("qty").type)
    assert rows_of(t, "id", "title", "qty") == [(1, "n1", None), (2, "n2", None), (3, "t3", 2**40)]

    bad = (cols[0], ColumnInfo("title", "int"), cols[2])
    with pytest.raises(
        SinkError,
        match=r"DDL 'ALTER TABLE items MODIFY title INT' changes column 'title' of table 'shop_items'",
    ):
        alter("ALTER TABLE items MODIFY title INT", 31, bad)

    sink.apply_ddl(DDLEvent("TRUNCATE TABLE items", "shop", "items", DDLType.TRUNCATE_TABLE, 40, 40))
    assert read_table(sink).num_rows == 0
    run_batch(sink, 2, [ins(41, (4, "t4", 1))], 41, info)
    sink.apply_ddl(
        DDLEvent("TRUNCATE TABLE items", "shop", "items", DDLType.TRUNCATE_TABLE, 40, 40)
    )  # replay
    assert rows_of(read_table(sink), "id") == [(4,)]
    sink.apply_ddl(DDLEvent("DROP TABLE items", "shop", "items", DDLType.DROP_TABLE, 42, 42))
    assert read_table(sink).num_rows == 1  # a dropped table is left as it is
    sink.close()


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_table_without_key_needs_changelog(fmt: str, tmp_path: Path) -> None:
    info = TableInfo("shop", "log", (ColumnInfo("v", "int"),))
    sink = make_sink(f"{fmt}://{tmp_path}/wh")
    with pytest.raises(SinkError, match=r"shop.log has no primary key.*use mode=changelog"):
        run_batch(sink, 0, [ins(1, (1,), info=info)], 1, info)
    log_sink = make_sink(f"{fmt}://{tmp_path}/wh2?mode=changelog")
    run_batch(log_sink, 0, [ins(1, (1,), info=info), ins(1, (1,), 1, info=info)], 1, info)
    assert read_table(log_sink, "shop_log").num_rows == 2


def test_composite_key_and_decimal_key(tmp_path: Path) -> None:
    cols = (
        ColumnInfo("a", "bigint", unsigned=True, nullable=False),
        ColumnInfo("b", "varchar", nullable=False),
        ColumnInfo("v", "int"),
    )
    info = TableInfo("shop", "ck", cols, (IndexInfo("PRIMARY", ("a", "b"), True, True),), version=1)
    for fmt in FORMATS:
        sink = make_sink(f"{fmt}://{tmp_path}/{fmt}")
        top = 2**64 - 1
        run_batch(sink, 0, [ins(1, (top, "x", 1), info=info), ins(1, (top, "y", 2), 1, info=info)], 1, info)
        run_batch(
            sink,
            1,
            [upd(2, (top, "x", 1), (top, "x", 5), info=info), dele(2, (top, "y", 2), 1, info=info)],
            2,
            info,
        )
        assert rows_of(read_table(sink, "shop_ck"), "a", "b", "v") == [(Decimal(top), "x", 5)]
        sink.close()


@pytest.mark.parametrize("fmt", FORMATS)
def test_keys_of_temporal_and_binary_types(fmt: str, tmp_path: Path) -> None:
    cols = (
        ColumnInfo("at", "datetime", fsp=6, nullable=False),
        ColumnInfo("k", "varbinary", length=8, nullable=False),
        ColumnInfo("v", "int"),
    )
    info = TableInfo("shop", "tk", cols, (IndexInfo("PRIMARY", ("at", "k"), True, True),), version=1)
    sink = make_sink(f"{fmt}://{tmp_path}/wh")
    a, b = "2024-01-01 00:00:00.000001", "2024-01-01 00:00:00.000002"
    run_batch(sink, 0, [ins(1, (a, b"\x00", 1), info=info), ins(1, (b, b"\xff", 2), 1, info=info)], 1, info)
    run_batch(
        sink,
        1,
        [upd(2, (a, b"\x00", 1), (a, b"\x00", 3), info=info), ins(2, (b, b"\x01", 4), 1, info=info)],
        2,
        info,
    )
    got = rows_of(read_table(sink, "shop_tk"), "k", "v")
    assert got == [(b"\x00", 3), (b"\x01", 4), (b"\xff", 2)]
    sink.close()


@pytest.mark.parametrize("mode", ["changelog", "upsert"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_the_tag_is_checked_inside_the_commit_two_drivers_apply_a_batch_once(
    fmt: str, mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Driver B read the table before driver A committed the same batch: B's commit fails (a passing
    fault), and B's retry finds A's tag and applies nothing. The batch is in the table once.
    Iceberg: pyiceberg asserts the snapshot B read is still current; Delta: delta-rs refuses a
    commit whose application transaction id a commit since B's version carries."""
    from sparkcdc.errors import SinkUnavailable

    uri = f"{fmt}://{tmp_path}/wh?mode={mode}"
    a, b = make_sink(uri), make_sink(uri)
    run_batch(a, 0, [ins(10, row(1))], 10)
    batch = [ins(11, row(2)), upd(12, row(1), row(1, "u"))]
    fmt_b = b.applier.fmt
    loader = "_load" if fmt == "iceberg" else "_table"
    stale = getattr(fmt_b, loader)("shop_items")  # driver B loaded the table here
    run_batch(a, 1, batch, 12)
    with monkeypatch.context() as mp:
        mp.setattr(type(fmt_b), loader, lambda self, name: stale)
        mp.setattr(type(fmt_b), "checkpoint", lambda self, name, cf: None)  # B's early check saw nothing
        with pytest.raises(SinkUnavailable, match="another driver committed"):
            run_batch(b, 1, batch, 12)
    run_batch(b, 1, batch, 12)  # the retry: A's tag is there
    t = read_table(a)
    if mode == "changelog":
        assert rows_of(t, "_commit_ts", "_op", "id") == [(10, "I", 1), (11, "I", 2), (12, "U", 1)]
    else:
        assert rows_of(t, "id", "name") == [(1, "u1"), (2, "n2")]
    if fmt == "iceberg":
        stored = a.applier.fmt._load("shop_items").metadata.properties  # type: ignore[attr-defined]
        assert "commit.retry.num-retries" not in stored, "the table's own properties were changed"
    a.close()
    b.close()
