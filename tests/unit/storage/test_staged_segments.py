"""Storage writers of parallel segments stage their files; the commit numbers them in segment order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkcdc.sink.base import WriterContext
from sparkcdc.sink.storage import StorageSink
from sparkcdc.sink.storage.writer import STAGING_DIR

from .test_writer import V1, data_files, ins, lines, make_sink, table, write_batch

NO_DATE = '[sink]\ndate-separator = "none"\n'


def _segment(sink: StorageSink, segment: int, segments: int, rows: list, batch: int = 1) -> dict:
    w = sink.open_writer(WriterContext("cf", batch, 0, segment=segment, segments=segments))
    for r in rows:
        w.write(r, table())
    return w.close()


def _ids(root: Path) -> list[list[int]]:
    return [[int(m["data"][0]["id"]) for m in lines(root / f)] for f in data_files(root)]


def test_segments_written_out_of_order_are_published_in_segment_order(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, toml=NO_DATE)
    # An earlier batch wrote file 1 directly; the staged files continue after it.
    write_batch(sink, [ins(1, V1 + 1)], table(), batch=0)
    sink.commit(0, [], V1 + 1)
    # Segment 1 finishes first, segment 0 second.
    late = _segment(sink, 1, 2, [ins(i, V1 + 100 + i) for i in range(200, 210)])
    early = _segment(sink, 0, 2, [ins(i, V1 + 10 + i) for i in range(100, 110)])
    assert not late["files"] and not early["files"], "parallel segments must not number files themselves"
    assert data_files(tmp_path) == ["db/t/%d/CDC00000000000000000001.json" % V1]
    assert (tmp_path / STAGING_DIR).is_dir()

    sink.commit(1, [early, late], V1 + 400)

    files = data_files(tmp_path)
    ids = _ids(tmp_path)
    n = len(files)
    assert n == 3 and files == [f"db/t/{V1}/CDC{k:020d}.json" for k in range(1, n + 1)]
    flat = [i for f in ids for i in f]
    assert flat == [1, *range(100, 110), *range(200, 210)], "rows are out of segment order"
    index = (tmp_path / "db" / "t" / str(V1) / "meta" / "CDC.index").read_text()
    assert index == f"CDC{n:020d}.json\n"
    # The batch's staging directory is gone; the metadata carries the checkpoint.
    assert not (tmp_path / STAGING_DIR / "cf" / "b1").exists()
    assert json.loads((tmp_path / "metadata").read_text())["checkpoint-ts"] in (V1 + 1, V1 + 400)


def test_a_failed_attempt_leaves_nothing_published(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, toml=NO_DATE)
    failed = sink.open_writer(WriterContext("cf", 7, 0, segment=0, segments=2))
    failed.write(ins(1, V1 + 1), table())
    failed.close()  # its task failed after closing: Spark never delivers this message
    retry = _segment(sink, 0, 2, [ins(1, V1 + 1)], batch=7)
    other = _segment(sink, 1, 2, [ins(2, V1 + 2)], batch=7)
    sink.commit(7, [retry, other], V1 + 2)
    assert _ids(tmp_path) == [[1], [2]]
    assert not (tmp_path / STAGING_DIR / "cf" / "b7").exists()


def test_staged_files_stream_and_are_published_in_segment_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sparkcdc.sink.storage import writer as writer_module

    monkeypatch.setattr(writer_module, "COALESCE_ROWS", 8)
    sink = make_sink(tmp_path, toml=NO_DATE)
    late = _segment(sink, 1, 2, [ins(i, V1 + 1000 + i) for i in range(1000, 1100)])
    early = _segment(sink, 0, 2, [ins(i, V1 + 10 + i) for i in range(100, 200)])
    sink.commit(1, [early, late], V1 + 3000)
    assert [i for f in _ids(tmp_path) for i in f] == [*range(100, 200), *range(1000, 1100)]
    assert not list(tmp_path.rglob(".tmp-*"))
