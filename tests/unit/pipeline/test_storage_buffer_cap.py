"""The storage writer keeps a task's buffers together under twice ``file-size``.

Many tables written at once, none reaching ``file-size`` alone: without a bound each table's
buffer would grow to ``file-size``. The writer writes its largest buffer once the sum reaches
twice ``file-size``; every row still reaches its table's files, in order. Under
``transaction-atomicity = "table"`` the running transaction's buffer is not cut.
"""

from __future__ import annotations

from pathlib import Path

from sparkcdc.sink.base import WriterContext
from tests.unit.storage.test_writer import V1, data_files, ins, lines, make_sink, table

MIB = 1 << 20
TABLES = 24
ROWS = 400
VALUE = "v" * 300


def _ids_by_table(root: Path) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for f in data_files(root):
        name = f.split("/")[1]
        out.setdefault(name, []).extend(int(m["data"][0]["id"]) for m in lines(root / f))
    return out


def test_buffers_together_stay_under_twice_file_size(tmp_path: Path) -> None:
    sink = make_sink(tmp_path, params=f"&file-size={MIB}", toml='[sink]\ndate-separator = "none"\n')
    infos = {k: table(name=f"t{k}") for k in range(TABLES)}
    w = sink.open_writer(WriterContext("cf", 0, 0))
    most = 0
    ts = V1 + 1
    for i in range(ROWS):
        for k, info in infos.items():
            w.write(ins(i, ts, VALUE, name=f"t{k}"), info)
            ts += 1
            most = max(most, w._buffered)  # type: ignore[attr-defined]
    # ~24 x 400 x 0.45 KB = 4.3 MB written, no table near 1 MiB alone
    assert most < 2 * MIB + 4096, most
    files_before_close = len(data_files(tmp_path))
    assert files_before_close >= 2, "nothing was written before close"
    w.close()
    ids = _ids_by_table(tmp_path)
    assert ids == {f"t{k}": list(range(ROWS)) for k in range(TABLES)}


def test_table_atomicity_does_not_cut_the_running_transaction(tmp_path: Path) -> None:
    toml = '[sink]\ndate-separator = "none"\ntransaction-atomicity = "table"\n'
    sink = make_sink(tmp_path, params=f"&file-size={MIB}", toml=toml)
    infos = {k: table(name=f"t{k}") for k in range(TABLES)}
    w = sink.open_writer(WriterContext("cf", 0, 0))
    ts = V1 + 1  # one transaction over every table: no buffer may be cut
    for i in range(ROWS):
        for k, info in infos.items():
            w.write(ins(i, ts, VALUE, name=f"t{k}"), info)
    assert data_files(tmp_path) == []
    w.close()
    assert {f.split("/")[1] for f in data_files(tmp_path)} == {f"t{k}" for k in range(TABLES)}
    assert len(data_files(tmp_path)) == TABLES, "one file per table for the one transaction"
    assert _ids_by_table(tmp_path) == {f"t{k}": list(range(ROWS)) for k in range(TABLES)}
