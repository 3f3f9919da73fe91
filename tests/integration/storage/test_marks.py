"""The storage sink's ``metadata`` never goes backwards, on local files and on S3 (moto_server).

A changefeed resumed from an older position (a failover whose meta database lags what the sink
published, a lost Spark checkpoint) writes its replayed rows again, but ``checkpoint-ts`` keeps
the larger published value until the replay passes it. Its batch dates come from commit_ts.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import DecodeError
from sparkcdc.model import ColumnInfo, IndexInfo, RowChange, TableInfo, compose_ts
from sparkcdc.services.s3 import LocalS3
from sparkcdc.sink import create_sink
from sparkcdc.sink.base import WriterContext
from sparkcdc.sink.storage import StorageSink

pytestmark = pytest.mark.integration

MIDNIGHT_MS = 1_683_676_800_000  # 2023-05-10 00:00:00 UTC
V = compose_ts(MIDNIGHT_MS - 3_600_000)
INFO = TableInfo(
    "shop",
    "orders",
    (ColumnInfo("id", "bigint", nullable=False), ColumnInfo("note", "varchar", length=64)),
    (IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
    version=V,
)


def ts(i: int) -> int:
    """Row i commits i seconds after 23:59:50: rows 10 and later are on the next day."""
    return compose_ts(MIDNIGHT_MS - 10_000 + i * 1_000)


class Store:
    """Where a test's sink writes, read back through the same kind of filesystem."""

    def __init__(self, uri: str, read: Callable[[str], bytes | None], find: Callable[[], list[str]]) -> None:
        self.uri = uri
        self.read = read
        self.find = find

    def checkpoint(self) -> int | None:
        data = self.read("metadata")
        return None if data is None else int(json.loads(data)["checkpoint-ts"])

    def ids(self) -> list[int]:
        """Row ids in every data file, files in path order (date folders sort by date)."""
        out = []
        for f in sorted(p for p in self.find() if "/CDC" in p and not p.endswith("CDC.index")):
            data = self.read(f) or b""
            out += [int(json.loads(x)["data"][0]["id"]) for x in data.split(b"\r\n") if x]
        return out


@pytest.fixture(scope="module")
def s3() -> Iterator[LocalS3]:
    with LocalS3() as server:
        yield server


@pytest.fixture(params=["file", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "file":

        def read_local(rel: str) -> bytes | None:
            p = tmp_path / rel
            return p.read_bytes() if p.exists() else None

        def find_local() -> list[str]:
            return [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()]

        return Store(
            f"file://{tmp_path}?protocol=canal-json&enable-tidb-extension=true", read_local, find_local
        )
    s3: LocalS3 = request.getfixturevalue("s3")
    bucket = "marks-" + uuid.uuid4().hex[:8]
    s3.create_bucket(bucket)
    fs = s3.filesystem()
    root = f"{bucket}/cf"

    def read_s3(rel: str) -> bytes | None:
        fs.invalidate_cache()
        try:
            data: bytes = fs.cat_file(f"{root}/{rel}")
        except FileNotFoundError:
            return None
        return data

    def find_s3() -> list[str]:
        fs.invalidate_cache()
        return [p[len(root) + 1 :] for p in fs.find(root)]

    uri = s3.sink_uri(root, protocol="canal-json", **{"enable-tidb-extension": "true"})
    return Store(uri, read_s3, find_s3)


def new_sink(store: Store) -> StorageSink:
    """A sink as a (re)started changefeed builds it: nothing in memory from an earlier run."""
    sink = create_sink(store.uri, ReplicaConfig.from_toml("[sink]\nfile-index-digit = 6"), "cf")
    assert isinstance(sink, StorageSink)
    sink.check()
    return sink


def run_batch(sink: StorageSink, batch_id: int, ids: range) -> None:
    """Write rows ``ids`` as one batch and commit it at the last row's commit_ts, metadata at once."""
    w = sink.open_writer(WriterContext("cf", batch_id, 0))
    for i in ids:
        w.write(RowChange("I", "shop", "orders", V, ts(i), None, (i, f"n{i}")), INFO)
    sink.commit(batch_id, [w.close()], ts(ids[-1]))
    sink.flush_metadata()


def test_resume_from_an_older_offset_never_moves_metadata_back(store: Store) -> None:
    first = new_sink(store)
    marks = []
    for b, ids in enumerate((range(0, 6), range(6, 12), range(12, 16))):
        run_batch(first, b, ids)
        marks.append(store.checkpoint())
    first.close()
    assert marks == [ts(5), ts(11), ts(15)]

    # Failover: the new owner resumes from an older offset (after row 5) with fresh batch ids.
    second = new_sink(store)
    for b, ids in enumerate((range(6, 9), range(9, 14), range(14, 18), range(18, 20))):
        run_batch(second, b, ids)
        marks.append(store.checkpoint())
    second.close()
    assert marks[3:] == [ts(15), ts(15), ts(17), ts(19)]
    assert marks == sorted(marks), f"metadata went backwards: {marks}"

    # The replayed rows were written again (at-least-once); nothing was lost.
    ids = store.ids()
    assert sorted(set(ids)) == list(range(20))
    assert sorted(ids) == sorted([*range(16), *range(6, 20)])
    # Date folders follow the batches' commit_ts: a batch that starts before midnight (first run:
    # rows 6..11; second run: rows 9..13) keeps its rows after midnight in its folder; batches that
    # start after it (rows 12.., 14.., 18..) are in the next day's.
    days = {p.split("/")[3] for p in store.find() if p.startswith("shop/orders/") and "/CDC0" in p}
    assert days == {"2023-05-09", "2023-05-10"}
    day1 = [p for p in store.find() if "/2023-05-09/CDC0" in p]
    in_day1 = {
        int(json.loads(x)["data"][0]["id"]) for p in day1 for x in (store.read(p) or b"").split(b"\r\n") if x
    }
    assert in_day1 == set(range(14))


def test_throttled_checkpoints_and_close_keep_the_larger_mark(store: Store) -> None:
    first = new_sink(store)
    run_batch(first, 0, range(0, 10))
    assert store.checkpoint() == ts(9)
    # A restarted run replays from the start; its throttled checkpoint is written at close.
    second = new_sink(store)
    w = second.open_writer(WriterContext("cf", 0, 0))
    for i in range(0, 4):
        w.write(RowChange("I", "shop", "orders", V, ts(i), None, (i, f"n{i}")), INFO)
    second.commit(0, [w.close()], ts(3))
    second.close()
    assert store.checkpoint() == ts(9)


def test_a_broken_metadata_file_is_refused_with_the_fix(store: Store) -> None:
    sink = new_sink(store)
    sink.settings.backend.write("metadata", b"not json")
    with pytest.raises(DecodeError, match="fix or remove it"):
        run_batch(sink, 0, range(0, 2))
