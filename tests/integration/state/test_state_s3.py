"""The data dir on a real S3 server (moto_server on 127.0.0.1): objects, range progress, history, refusals."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest

from sparkcdc.errors import ConfigError
from sparkcdc.pipeline.snapshot import FileRangeStore, RangeState, StaleRangeWriter
from sparkcdc.pipeline.state import StateDir, open_history_store
from sparkcdc.services.s3 import LocalS3

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def s3() -> Iterator[LocalS3]:
    with LocalS3() as server:
        server.create_bucket("state")
        yield server


def test_objects_parquet_and_folders_on_s3(s3: LocalS3) -> None:
    d = StateDir.parse(s3.sink_uri("state/cf-objects"))
    d.check()
    assert not d.local and d.read_json("start.json") is None
    d.write_json("start.json", {"file": "b.000001", "pos": 4})
    assert d.read_json("start.json") == {"file": "b.000001", "pos": 4}
    rows = d.child("snapshot").child("rows")
    t = pa.table({"key": ["1", "2"], "payload": [b"a", b"b"]})
    rows.write_parquet("7/1-000000000002.parquet", t)
    assert rows.read_parquet("7/1-000000000002.parquet").equals(t)
    assert rows.size("7/1-000000000002.parquet") and rows.list() == ["7"]
    # A location string opens the same folder in another process (an executor).
    again = StateDir.parse(d.child("snapshot").join("rows"))
    assert again.read_parquet("7/1-000000000002.parquet").equals(t)
    rows.remove_tree()
    assert rows.list() == [] and d.read_json("start.json") is not None
    assert s3.filesystem().ls("state/cf-objects", detail=False) == ["state/cf-objects/start.json"]


def test_range_progress_on_s3_fences_an_older_run(s3: LocalS3) -> None:
    store = FileRangeStore(StateDir.parse(s3.sink_uri("state/cf-ranges")).join("snapshot/ranges"))
    assert store.load_all() == []
    store.save(RangeState(2, "db", "t", None, None, 77, rows_copied=5, epoch=1))
    store.save(RangeState(1, "db", "t", None, None, 77, stage="done", epoch=1))
    newer = RangeState(2, "db", "t", None, None, 77, rows_copied=5, epoch=2)
    store.save(newer)
    with pytest.raises(StaleRangeWriter, match="belongs to snapshot run 2"):
        store.save(RangeState(2, "db", "t", None, None, 77, rows_copied=9, epoch=1))
    got = store.load_all()
    assert [(s.range_id, s.epoch, s.rows_copied) for s in got] == [(1, 1, 0), (2, 2, 5)]
    store.clear()
    assert store.load_all() == []


def test_schema_history_on_s3_appends(s3: LocalS3) -> None:
    loc = StateDir.parse(s3.sink_uri("state/cf-history")).join("schema_history.jsonl")
    store = open_history_store(loc)
    store.append([{"v": 1}])
    store.append([{"v": 2}])
    assert open_history_store(loc).load() == [{"v": 1}, {"v": 2}]


def test_a_missing_bucket_or_wrong_credentials_are_refused_at_start(
    s3: LocalS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match=r"cannot write to the data dir 's3://nobucket/x\?") as e:
        StateDir.parse(s3.sink_uri("nobucket/x")).check()
    assert "sparkcdc-secret" not in e.value.message
    # No credentials anywhere: not in the URL, the environment or a config file.
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    bare = f"s3://state/x?endpoint={s3.endpoint}&region=us-east-1"
    with pytest.raises(ConfigError, match="check the bucket exists and the credentials") as e:
        StateDir.parse(bare).check()
    assert "\n" not in e.value.message
