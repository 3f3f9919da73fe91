"""Storage writer on a local directory: files, index continuation, rolling, schema files, metadata."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import SchemaError
from sparkcdc.model import ColumnInfo, DDLEvent, DDLType, IndexInfo, RowChange, TableInfo
from sparkcdc.sink.base import WriterContext
from sparkcdc.sink.storage import StorageSink, ensure_table_schema
from sparkcdc.sink.storage.layout import commit_date
from sparkcdc.sink.storage.schema_file import TableDefinition

V1 = 440000000000000000
V2 = 440000000000100000


def table(version: int = V1, name: str = "t") -> TableInfo:
    return TableInfo(
        schema="db",
        table=name,
        columns=(ColumnInfo("id", "int", nullable=False), ColumnInfo("v", "varchar", length=32)),
        indexes=(IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
        version=version,
    )


def ins(i: int, ts: int, v: str = "x", version: int = V1, name: str = "t") -> RowChange:
    return RowChange("I", "db", name, version, ts, None, (i, v))


def make_sink(root: Path, params: str = "", toml: str = "", protocol: str = "canal-json") -> StorageSink:
    cfg = ReplicaConfig.from_toml(toml)
    return StorageSink(f"file://{root}?protocol={protocol}&enable-tidb-extension=true{params}", cfg, "cf")


def write_batch(sink: StorageSink, rows: list[RowChange], info: TableInfo, batch: int = 0) -> dict:
    w = sink.open_writer(WriterContext("cf", batch, 0))
    for r in rows:
        w.write(r, info)
    return w.close()


def data_files(root: Path) -> list[str]:
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("CDC*") if p.is_file() and p.name != "CDC.index"
    )


def lines(p: Path) -> list[dict]:
    return [json.loads(x) for x in p.read_bytes().split(b"\r\n") if x]


def test_batch_writes_schema_index_and_data_file(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, toml="[sink]\ndate-separator = 'none'")
    msg = write_batch(sink, [ins(1, V1 + 10), ins(2, V1 + 11)], table())
    assert msg["rows"] == 2 and msg["files"] == [f"db/t/{V1}/CDC00000000000000000001.json"]
    f = tmp_path / msg["files"][0]
    rows = lines(f)
    assert [r["data"][0]["id"] for r in rows] == ["1", "2"]
    assert [r["_tidb"]["commitTs"] for r in rows] == [V1 + 10, V1 + 11]
    assert (tmp_path / f"db/t/{V1}/meta/CDC.index").read_bytes() == b"CDC00000000000000000001.json\n"
    schema_path = TableDefinition.from_table_info(table(), V1).path()
    body = json.loads((tmp_path / schema_path).read_bytes())
    assert body["Query"] == "" and body["TableVersion"] == V1 and body["TableColumnsTotal"] == 2


def test_date_directory_and_index_width(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, toml="[sink]\ndate-separator = 'day'\nfile-index-digit = 6")
    msg = write_batch(sink, [ins(1, V1 + 1)], table())
    # V1 + 1 committed on 2023-03-10 (UTC, the default time-zone); the date is the commit's, not today's.
    assert commit_date("day", V1 + 1) == "2023-03-10"
    assert msg["files"] == [f"db/t/{V1}/2023-03-10/CDC000001.json"]


def test_index_continues_across_batches_and_restarts(tmp_path: Path) -> None:
    toml = "[sink]\ndate-separator = 'none'\nfile-index-digit = 6"
    sink = make_sink(tmp_path, toml=toml)
    assert write_batch(sink, [ins(1, V1 + 1)], table())["files"] == [f"db/t/{V1}/CDC000001.json"]
    assert write_batch(sink, [ins(2, V1 + 2)], table(), 1)["files"] == [f"db/t/{V1}/CDC000002.json"]
    # a new sink (a restarted changefeed) reads the index: the indexed file is non-empty → max+1
    sink2 = make_sink(tmp_path, toml=toml)
    assert write_batch(sink2, [ins(3, V1 + 3)], table(), 2)["files"] == [f"db/t/{V1}/CDC000003.json"]
    # the index names a file that never got written (crash between index and data) → reuse it
    (tmp_path / f"db/t/{V1}/meta/CDC.index").write_bytes(b"CDC000007.json\n")
    assert write_batch(sink2, [ins(4, V1 + 4)], table(), 3)["files"] == [f"db/t/{V1}/CDC000007.json"]
    # ... or an empty one → reuse it as well
    (tmp_path / f"db/t/{V1}/meta/CDC.index").write_bytes(b"CDC000009.json\n")
    (tmp_path / f"db/t/{V1}/CDC000009.json").write_bytes(b"")
    assert write_batch(sink2, [ins(5, V1 + 5)], table(), 4)["files"] == [f"db/t/{V1}/CDC000009.json"]
    assert write_batch(sink2, [ins(6, V1 + 6)], table(), 5)["files"] == [f"db/t/{V1}/CDC000010.json"]


def test_file_size_rolls_between_transactions_with_table_atomicity(tmp_path: Path) -> None:
    sink = make_sink(
        tmp_path,
        toml="[sink]\ndate-separator = 'none'\nfile-index-digit = 6\ntransaction-atomicity = 'table'",
    )
    sink.settings.file_size = 1  # below the 1 MiB clamp, to roll at every transaction boundary
    rows = [ins(1, V1 + 1), ins(2, V1 + 1), ins(3, V1 + 1), ins(4, V1 + 2), ins(5, V1 + 3), ins(6, V1 + 3)]
    msg = write_batch(sink, rows, table())
    assert [os.path.basename(f) for f in msg["files"]] == [
        "CDC000001.json",
        "CDC000002.json",
        "CDC000003.json",
    ]
    per_file = [[r["data"][0]["id"] for r in lines(tmp_path / f)] for f in msg["files"]]
    assert per_file == [["1", "2", "3"], ["4"], ["5", "6"]]
    assert (tmp_path / f"db/t/{V1}/meta/CDC.index").read_bytes() == b"CDC000003.json\n"


def test_file_size_rolls_inside_a_transaction_without_atomicity(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, toml="[sink]\ndate-separator = 'none'\nfile-index-digit = 6")
    sink.settings.file_size = 1
    msg = write_batch(sink, [ins(1, V1 + 1), ins(2, V1 + 1), ins(3, V1 + 2)], table())
    assert len(msg["files"]) == 3


def test_file_size_real_threshold(tmp_path: Path) -> None:
    sink = make_sink(
        tmp_path, "&file-size=1048576", toml="[sink]\ndate-separator = 'none'\nfile-index-digit = 6"
    )
    big = "y" * 30
    rows = [ins(i, V1 + i, big) for i in range(1, 6001)]
    msg = write_batch(sink, rows, table())
    sizes = [(tmp_path / f).stat().st_size for f in msg["files"]]
    assert len(sizes) >= 2 and all(s >= 1048576 for s in sizes[:-1]) and sum(sizes) == msg["bytes"]
    ids = [int(r["data"][0]["id"]) for f in msg["files"] for r in lines(tmp_path / f)]
    assert ids == list(range(1, 6001))
    for f in msg["files"]:
        ts = [r["_tidb"]["commitTs"] for r in lines(tmp_path / f)]
        assert ts == sorted(ts)


def test_out_of_order_rows_are_refused(tmp_path: Path) -> None:
    sink = make_sink(tmp_path)
    w = sink.open_writer(WriterContext("cf", 0, 0))
    w.write(ins(1, V1 + 5), table())
    with pytest.raises(SchemaError, match="out of commit order"):
        w.write(ins(2, V1 + 4), table())


def test_update_changing_the_key_is_split(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, toml="[sink]\ndate-separator = 'none'")
    rows = [
        RowChange("U", "db", "t", V1, V1 + 1, (1, "a"), (2, "a")),
        RowChange("U", "db", "t", V1, V1 + 2, (2, "a"), (2, "b")),
    ]
    msg = write_batch(sink, rows, table())
    got = [(r["type"], r["data"][0]["id"]) for r in lines(tmp_path / msg["files"][0])]
    assert got == [("DELETE", "1"), ("INSERT", "2"), ("UPDATE", "2")]


def test_ddl_schema_files_and_new_version_directory(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, toml="[sink]\ndate-separator = 'none'")
    sink.apply_ddl(DDLEvent("CREATE DATABASE db", "db", "", DDLType.CREATE_SCHEMA, V1 - 5, V1 - 5))
    create = DDLEvent(
        "CREATE TABLE t (id int primary key, v varchar(32))", "db", "t", DDLType.CREATE_TABLE, V1, V1, table()
    )
    sink.apply_ddl(create)
    write_batch(sink, [ins(1, V1 + 1)], table())
    t2 = dataclasses.replace(table(V2), columns=(*table().columns, ColumnInfo("w", "int")))
    sink.apply_ddl(DDLEvent("ALTER TABLE t ADD COLUMN w int", "db", "t", DDLType.ALTER_TABLE, V2, V2, t2))
    msg = write_batch(sink, [RowChange("I", "db", "t", V2, V2 + 1, None, (2, "b", 3))], t2, 1)
    assert msg["files"] == [f"db/t/{V2}/CDC00000000000000000001.json"]
    sink.apply_ddl(DDLEvent("DROP TABLE t", "db", "t", DDLType.DROP_TABLE, V2 + 9, V2 + 9))
    meta = sorted(p.name for p in (tmp_path / "db/t/meta").iterdir())
    assert [m.split("_")[1] for m in meta] == [str(V1), str(V2), str(V2 + 9)]
    drop = json.loads((tmp_path / "db/t/meta" / meta[2]).read_bytes())
    assert drop["Query"] == "DROP TABLE t" and drop["Type"] == 4 and drop["TableColumnsTotal"] == 3
    assert meta[2].endswith(meta[1].split("_")[2])  # same columns → same checksum
    db_meta = list((tmp_path / "db/meta").iterdir())
    assert len(db_meta) == 1
    db_body = json.loads(db_meta[0].read_bytes())
    assert db_body == {
        "Table": "",
        "Schema": "db",
        "Version": 1,
        "TableVersion": V1 - 5,
        "Query": "CREATE DATABASE db",
        "Type": 1,
        "TableColumns": None,
        "TableColumnsTotal": 0,
    }


def test_existing_schema_with_same_checksum_reuses_its_version(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, toml="[sink]\ndate-separator = 'none'")
    backend = sink.settings.backend
    assert ensure_table_schema(backend, table(), V1) == V1
    # the table shows up later with another version but the same shape (a restarted changefeed)
    assert ensure_table_schema(backend, table(), V1 + 777) == V1
    assert ensure_table_schema(backend, table(), 0) == V1
    with pytest.raises(SchemaError, match="no table version"):
        ensure_table_schema(backend, table(name="other"), 0)


def test_metadata_is_throttled_but_flushable(tmp_path: Path) -> None:
    sink = make_sink(tmp_path)
    sink.commit(0, [], 100)
    meta = tmp_path / "metadata"
    assert meta.read_bytes() == b'{"checkpoint-ts":100}'
    sink.commit(1, [], 200)  # within 2 s: held back
    assert meta.read_bytes() == b'{"checkpoint-ts":100}'
    sink.close()  # the final checkpoint before stop is written
    assert meta.read_bytes() == b'{"checkpoint-ts":200}'
    sink.flush_metadata(300)
    assert meta.read_bytes() == b'{"checkpoint-ts":300}'
    sink._last_metadata_time = time.monotonic() - 3
    sink.commit(2, [], 400)
    assert meta.read_bytes() == b'{"checkpoint-ts":400}'
    # Within 2 s of the local clock, but the checkpoint moved 2 s of physical time: written.
    one_s = 1000 << 18
    sink.commit(3, [], 400 + one_s)
    assert meta.read_bytes() == b'{"checkpoint-ts":400}'
    sink.commit(4, [], 400 + 2 * one_s)
    assert meta.read_bytes() == b'{"checkpoint-ts":%d}' % (400 + 2 * one_s)


def test_sink_routes_by_table_and_is_picklable(tmp_path: Path) -> None:
    import pickle
    import zlib

    sink = make_sink(tmp_path, "&worker-count=4")
    assert sink.num_writers == 4
    assert sink.route(ins(1, 1), table()) == zlib.crc32(b"dbt") % 4
    sink.settings.backend.list_dir("")
    clone = pickle.loads(pickle.dumps(sink))
    assert clone.settings.backend.root == str(tmp_path)
    assert write_batch(clone, [ins(1, V1 + 1)], table())["rows"] == 1


def test_rows_joined_in_runs_keep_order_header_and_byte_count(tmp_path: Path) -> None:
    """A buffer joins its rows in runs of COALESCE_ROWS; a file is written from those pieces."""
    from sparkcdc.sink.storage.writer import COALESCE_ROWS

    toml = "[sink]\ndate-separator = 'none'\n[sink.csv]\noutput-field-header = true"
    sink = make_sink(tmp_path, protocol="csv", toml=toml)
    n = 2 * COALESCE_ROWS + 17
    w = sink.open_writer(WriterContext("cf", 0, 0))
    for i in range(1, n + 1):  # two tables, interleaved, each past two runs
        w.write(ins(i, V1 + i, f"v{i}"), table())
        w.write(ins(i, V1 + i, f"u{i}", name="u"), table(name="u"))
    msg = w.close()
    assert len(msg["files"]) == 2 and msg["rows"] == 2 * n
    assert msg["bytes"] == sum((tmp_path / f).stat().st_size for f in msg["files"])
    for f, prefix in zip(sorted(msg["files"]), ["v", "u"], strict=True):
        text = (tmp_path / f).read_text().splitlines()
        assert text[0] == "ticdc-meta$operation,ticdc-meta$table,ticdc-meta$schema,id,v"
        assert [line.split(",")[-1] for line in text[1:]] == [f'"{prefix}{i}"' for i in range(1, n + 1)]


def _hidden(root: Path) -> list[Path]:
    return [p for p in root.rglob(".tmp-*") if p.is_file()]


def test_a_full_buffer_streams_into_its_file_which_appears_whole_at_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past COALESCE_ROWS a table's rows go into its file as they come; the file is hidden until whole."""
    from sparkcdc.sink.storage import writer as writer_module

    monkeypatch.setattr(writer_module, "COALESCE_ROWS", 8)
    toml = "[sink]\ndate-separator = 'none'\n[sink.csv]\noutput-field-header = true"
    sink = make_sink(tmp_path, protocol="csv", toml=toml)
    w = sink.open_writer(WriterContext("cf", 0, 0))
    n = 2000
    for i in range(1, n + 1):
        w.write(ins(i, V1 + i, f"v{i}"), table())
        w.write(ins(i, V1 + i, f"u{i}", name="u"), table(name="u"))
    # both files were started and hold most rows (past a file object's 8 KiB buffer) under hidden
    # names; no data file is visible yet
    streaming = _hidden(tmp_path)
    assert len(streaming) == 2 and all(p.stat().st_size > 40_000 for p in streaming)
    assert data_files(tmp_path) == []
    msg = w.close()
    assert _hidden(tmp_path) == [] and len(msg["files"]) == 2 and msg["rows"] == 2 * n
    assert msg["bytes"] == sum((tmp_path / f).stat().st_size for f in msg["files"])
    for f, prefix in zip(sorted(msg["files"]), ["v", "u"], strict=True):
        text = (tmp_path / f).read_text().splitlines()
        assert text[0] == "ticdc-meta$operation,ticdc-meta$table,ticdc-meta$schema,id,v"
        assert [line.split(",")[-1] for line in text[1:]] == [f'"{prefix}{i}"' for i in range(1, n + 1)]


def test_rows_of_large_values_go_into_the_file_at_the_byte_bound_not_the_row_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A buffer holds at most COALESCE_BYTES of encoded rows, however few rows that is."""
    from sparkcdc.sink.storage import writer as writer_module

    monkeypatch.setattr(writer_module, "COALESCE_BYTES", 64 * 1024)
    sink = make_sink(tmp_path, protocol="csv", toml="[sink]\ndate-separator = 'none'")
    w = sink.open_writer(WriterContext("cf", 0, 0))
    big = "x" * 10_000
    for i in range(1, 21):  # 200 kB in 20 rows, far fewer than COALESCE_ROWS
        w.write(ins(i, V1 + i, big), table())
    streaming = _hidden(tmp_path)
    # three runs of 64 KiB are in the file (the first past a file object's 8 KiB buffer)
    assert len(streaming) == 1 and streaming[0].stat().st_size >= 2 * 64 * 1024
    msg = w.close()
    assert msg["rows"] == 20 and msg["bytes"] == (tmp_path / msg["files"][0]).stat().st_size
    ids = [int(line.split(",")[-2]) for line in (tmp_path / msg["files"][0]).read_text().splitlines()]
    assert ids == list(range(1, 21))


def test_streamed_files_still_roll_at_file_size_between_transactions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sparkcdc.sink.storage import writer as writer_module

    monkeypatch.setattr(writer_module, "COALESCE_ROWS", 64)
    sink = make_sink(tmp_path, "&file-size=1048576", protocol="csv", toml="[sink]\ndate-separator = 'none'")
    big = "x" * 1000
    n = 2500  # about 2.5 MB: three files of at most 1 MiB and one row
    msg = write_batch(sink, [ins(i, V1 + i, big) for i in range(1, n + 1)], table())
    sizes = [(tmp_path / f).stat().st_size for f in msg["files"]]
    assert len(sizes) == 3 and all(s <= 1048576 + 1100 for s in sizes), sizes
    ids = [int(line.split(",")[-2]) for f in msg["files"] for line in (tmp_path / f).read_text().splitlines()]
    assert ids == list(range(1, n + 1))


def test_an_aborted_writer_leaves_no_partial_file_and_the_next_reuses_the_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sparkcdc.sink.storage import writer as writer_module

    monkeypatch.setattr(writer_module, "COALESCE_ROWS", 8)
    sink = make_sink(tmp_path, toml="[sink]\ndate-separator = 'none'")
    w = sink.open_writer(WriterContext("cf", 0, 0))
    for i in range(1, 50):
        w.write(ins(i, V1 + i), table())
    assert len(_hidden(tmp_path)) == 1
    w.abort()
    assert _hidden(tmp_path) == [] and data_files(tmp_path) == []
    # the index named the file before it was written: the retry writes that number
    msg = write_batch(sink, [ins(i, V1 + i) for i in range(1, 50)], table())
    assert msg["files"] == [f"db/t/{V1}/CDC00000000000000000001.json"]
    assert [r["data"][0]["id"] for r in lines(tmp_path / msg["files"][0])] == [str(i) for i in range(1, 50)]
