"""Date directories come from the batch's commit_ts: one folder per table per batch, never backwards."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sparkcdc.model import RowChange, TableInfo, compose_ts
from sparkcdc.sink.base import WriterContext
from sparkcdc.sink.storage import StorageSink

from .test_writer import data_files, lines, make_sink, table

MIDNIGHT_MS = 1_683_676_800_000  # 2023-05-10 00:00:00 UTC
V = compose_ts(MIDNIGHT_MS - 86_400_000)  # the table shape is a day older
DAY = '[sink]\ndate-separator = "day"\nfile-index-digit = 6\n'


def at(offset_ms: int, logical: int = 0) -> int:
    return compose_ts(MIDNIGHT_MS + offset_ms, logical)


def row(i: int, ts: int, name: str = "t") -> RowChange:
    return RowChange("I", "db", name, V, ts, None, (i, f"v{i}"))


def shape(name: str = "t") -> TableInfo:
    return table(V, name)


def write(sink: StorageSink, rows: list[RowChange], batch: int, segment: int = 0, segments: int = 1) -> dict:
    w = sink.open_writer(WriterContext("cf", batch, 0, segment=segment, segments=segments))
    for r in rows:
        w.write(r, shape(r.table))
    return w.close()


def test_a_batch_across_midnight_lands_in_one_folder_and_the_next_batch_later(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, toml=DAY)
    # A 1-byte file size (the URI allows 1 MiB at least): every transaction gets its own file, so the
    # batch has files on both sides of midnight.
    sink.settings = dataclasses.replace(sink.settings, file_size=1)
    first = [row(i, at(-2_000 + i * 1_000)) for i in range(4)]  # 23:59:58 .. 00:00:01
    m0 = write(sink, first, batch=0)
    sink.commit(0, [m0], first[-1].commit_ts)
    assert len(m0["files"]) == 4
    assert {f.split("/")[3] for f in m0["files"]} == {"2023-05-09"}

    second = [row(10 + i, at(5_000 + i)) for i in range(2)]
    m1 = write(sink, second, batch=1)
    sink.commit(1, [m1], second[-1].commit_ts)
    assert {f.split("/")[3] for f in m1["files"]} == {"2023-05-10"}

    # Folders sorted by date hold the rows in commit order (what the consumer applies).
    ids = [int(m["data"][0]["id"]) for f in data_files(tmp_path) for m in lines(tmp_path / f)]
    assert ids == [0, 1, 2, 3, 10, 11]


def test_a_replayed_batch_lands_where_it_landed_before(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, toml=DAY)
    rows = [row(i, at(-1_000 + i * 1_000)) for i in range(3)]
    first = write(sink, rows, batch=4)
    again = write(sink, rows, batch=0)  # a new claim: batch ids start again at 0
    assert [f.rsplit("/", 1)[0] for f in first["files"]] == [f.rsplit("/", 1)[0] for f in again["files"]]
    assert first["files"][0].split("/")[3] == "2023-05-09"


def test_every_table_gets_the_date_of_its_own_first_row(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, toml=DAY)
    rows = [row(1, at(-500), "a"), row(2, at(+500), "b"), row(3, at(+700), "a")]
    msg = write(sink, rows, batch=0)
    dirs = sorted(f.rsplit("/", 1)[0] for f in msg["files"])
    assert dirs == [f"db/a/{V}/2023-05-09", f"db/b/{V}/2023-05-10"]


def test_staged_segments_across_midnight_are_published_into_one_folder(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, toml=DAY)
    # Segment 1 (after midnight) finishes before segment 0 (before it).
    late = write(sink, [row(20 + i, at(1_000 + i)) for i in range(3)], batch=2, segment=1, segments=2)
    early = write(sink, [row(10 + i, at(-3_000 + i)) for i in range(3)], batch=2, segment=0, segments=2)
    assert [e[3] for e in early["staged"]] == ["2023-05-09"]
    assert [e[3] for e in late["staged"]] == ["2023-05-10"]
    sink.commit(2, [early, late], at(2_000))
    files = data_files(tmp_path)
    assert files == [f"db/t/{V}/2023-05-09/CDC000001.json", f"db/t/{V}/2023-05-09/CDC000002.json"]
    ids = [int(m["data"][0]["id"]) for f in files for m in lines(tmp_path / f)]
    assert ids == [10, 11, 12, 20, 21, 22]

    nxt = write(sink, [row(30, at(4_000))], batch=3, segment=0, segments=2)
    sink.commit(3, [nxt], at(4_000))
    assert data_files(tmp_path)[-1] == f"db/t/{V}/2023-05-10/CDC000001.json"


def test_files_staged_without_a_date_take_the_batch_commit_ts(tmp_path: Path) -> None:
    from sparkcdc.sink.storage.writer import stage_records

    sink = make_sink(tmp_path, toml=DAY)
    staged = stage_records(sink.settings, "cf", -1, "r0", shape(), V, [(b'{"x":1}\r\n', 1)])
    assert staged[0][0][3] is None
    sink.commit(-1, [{"staged": [e for e, _ in staged]}], at(-10))
    assert data_files(tmp_path) == [f"db/t/{V}/2023-05-09/CDC000001.json"]
