"""A replayed batch publishes only what its earlier attempt did not (``sink/storage/replay.py``).

The earlier attempt is made by writing the whole batch and then removing its last files (what a
failure between two file publishes leaves: the index names the last published file). The replay
must leave the directory holding each record exactly once, in order, for a table without a key,
whatever file the failure came after: inside a transaction cut by ``file-size`` or between two.
"""

from __future__ import annotations

import csv
import io
import json
import logging
from pathlib import Path

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import SinkError
from sparkcdc.model import ColumnInfo, RowChange, TableInfo
from sparkcdc.sink.base import WriterContext
from sparkcdc.sink.storage import StorageSink
from sparkcdc.sink.storage.layout import data_file_name, parse_index_file

V = 440000000000000000
TS = [V + 100, V + 200, V + 300]


def nopk() -> TableInfo:
    return TableInfo(
        schema="db",
        table="nopk",
        columns=(ColumnInfo("a", "int"), ColumnInfo("b", "varchar", length=64)),
        indexes=(),
        version=V,
    )


def batch_rows() -> list[RowChange]:
    """Three transactions of identical rows (a table without a key repeats values), one a key update."""
    rows: list[RowChange] = []
    for ts in TS:
        rows += [RowChange("I", "db", "nopk", V, ts, None, (1, "same")) for _ in range(6)]
        rows.append(RowChange("U", "db", "nopk", V, ts, (1, "same"), (2, "other")))
        rows.append(RowChange("D", "db", "nopk", V, ts, (2, "other"), None))
    return rows


def make_sink(root: Path, protocol: str, toml: str) -> StorageSink:
    cfg = ReplicaConfig.from_toml("[sink]\ndate-separator = 'none'\n" + toml)
    params = "&enable-tidb-extension=true" if protocol == "canal-json" else ""
    sink = StorageSink(f"file://{root}?protocol={protocol}{params}", cfg, "cf")
    sink.settings.file_size = 200  # below what the option accepts: several files per transaction
    return sink


def write(sink: StorageSink, rows: list[RowChange], replay: bool, batch: int = 1) -> None:
    w = sink.open_writer(WriterContext("cf", batch, 0, replay=replay))
    for r in rows:
        w.write(r, nopk())
    w.close()


def directory(root: Path) -> Path:
    return root / "db" / "nopk" / str(V)


def records(root: Path, protocol: str) -> list[str]:
    """Every record of the directory, file by file, as text (the fields that change per attempt dropped)."""
    out: list[str] = []
    d = directory(root)
    for f in sorted(d.glob("CDC*")):
        data = f.read_text()
        if protocol == "csv":
            out += [",".join(r) for r in csv.reader(io.StringIO(data, newline="")) if r]
        else:
            for line in data.split("\r\n"):
                if line:
                    msg = json.loads(line)
                    msg.pop("ts")
                    out.append(json.dumps(msg, sort_keys=True))
    return out


def fail_after(root: Path, files: int, ext: str) -> None:
    """Keep the first ``files`` data files of the directory, as a failure after publishing them leaves it."""
    d = directory(root)
    names = sorted(p.name for p in d.glob("CDC*"))
    for name in names[files:]:
        (d / name).unlink()
    (d / "meta" / "CDC.index").write_text(data_file_name(files, ext, 20) + "\n")


CASES = [
    ("csv", "[sink.csv]\ninclude-commit-ts = true\noutput-old-value = true\n", ".csv"),
    ("csv", "[sink.csv]\ninclude-commit-ts = true\noutput-field-header = true\n", ".csv"),
    ("canal-json", "", ".json"),
]


@pytest.mark.parametrize(("protocol", "toml", "ext"), CASES)
def test_a_replay_after_any_published_file_leaves_each_record_once(
    tmp_path: Path, protocol: str, toml: str, ext: str
) -> None:
    once = tmp_path / "once"
    write(make_sink(once, protocol, toml), batch_rows(), replay=False)
    want = records(once, protocol)
    total = len(list(directory(once).glob("CDC*")))
    assert total >= 4, "file-size must cut the batch into several files, some inside a transaction"
    for published in range(total + 1):
        root = tmp_path / f"after-{published}"
        sink = make_sink(root, protocol, toml)
        write(sink, batch_rows(), replay=False)
        fail_after(root, published, ext)
        write(sink, batch_rows(), replay=True)
        assert records(root, protocol) == want, f"failure after {published} of {total} files"


@pytest.mark.parametrize(("protocol", "toml", "ext"), CASES[:1] + CASES[2:])
def test_a_replay_after_a_committed_batch_skips_nothing(
    tmp_path: Path, protocol: str, toml: str, ext: str
) -> None:
    sink = make_sink(tmp_path, protocol, toml)
    first = [r for r in batch_rows() if r.commit_ts == TS[0]]
    rest = [r for r in batch_rows() if r.commit_ts != TS[0]]
    write(sink, first, replay=False, batch=1)
    write(sink, rest, replay=True, batch=2)  # the first batch after a restart: nothing of it was published
    once = tmp_path / "once"
    write(make_sink(once, protocol, toml), first, replay=False, batch=1)
    write(make_sink(once, protocol, toml), rest, replay=False, batch=2)
    assert records(tmp_path, protocol) == records(once, protocol)
    index = (directory(tmp_path) / "meta" / "CDC.index").read_bytes()
    assert parse_index_file(index, ext) == len(list(directory(tmp_path).glob("CDC*")))


def test_without_commit_ts_a_replay_publishes_again_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from sparkcdc.sink.storage.writer import StorageWriter

    StorageWriter._warned_untimed = False
    sink = make_sink(tmp_path, "csv", "")
    rows = [r for r in batch_rows() if r.commit_ts == TS[0]]
    write(sink, rows, replay=False)
    once = records(tmp_path, "csv")
    with caplog.at_level(logging.INFO):
        write(sink, rows, replay=True)
    assert "include-commit-ts = true" in caplog.text
    assert records(tmp_path, "csv") == once + once


def test_a_tail_the_replay_writes_differently_fails_by_name(tmp_path: Path) -> None:
    protocol, toml, ext = CASES[0]
    sink = make_sink(tmp_path, protocol, toml)
    write(sink, batch_rows(), replay=False)
    fail_after(tmp_path, 1, ext)
    first = sorted(directory(tmp_path).glob("CDC*"))[0]
    last = first.read_bytes().rstrip(b"\r\n").rsplit(b"\r\n", 1)[-1] + b"\r\n"
    assert b'"same"' in last
    # One more record at the same commit_ts, of a size no record of the replay has.
    first.write_bytes(first.read_bytes() + last.replace(b'"same"', b'"samesame"'))
    with pytest.raises(SinkError, match=r"nopk.* ends with part of a record"):
        write(sink, batch_rows(), replay=True)
