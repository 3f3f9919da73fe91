"""The data dir as a local folder: parsing, locations, validation at start, atomic objects."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pyarrow as pa
import pytest

from sparkcdc.capture.schema_history import FileSchemaHistoryStore
from sparkcdc.errors import ConfigError, StateStorageError
from sparkcdc.pipeline.state import (
    StateDir,
    StateSchemaHistoryStore,
    open_history_store,
    spark_checkpoint_location,
    split_location,
)


def test_a_plain_path_and_a_file_url_are_local_and_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    rel = StateDir.parse("state")
    assert rel.local and rel.location == str(tmp_path / "state")
    url = StateDir.parse(f"file://{tmp_path}/x")
    assert url.local and url.location == str(tmp_path / "x")
    assert url.join("cf-1") == str(tmp_path / "x" / "cf-1")
    assert url.child("cf-1").child("snapshot").location == str(tmp_path / "x" / "cf-1" / "snapshot")


def test_an_object_store_url_keeps_its_parameters_in_every_child_location() -> None:
    d = StateDir.parse(
        "s3://bucket/pre/fix?endpoint=http://127.0.0.1:9/&access-key=AK&secret-access-key=SK&region=r1"
    )
    assert not d.local and d.backend.root == "bucket/pre/fix"
    loc = d.child("cf-1").join("schema_history.jsonl")
    assert loc.startswith("s3://bucket/pre/fix/cf-1/schema_history.jsonl?endpoint=")
    again = StateDir.parse(loc)
    assert again.backend.root == "bucket/pre/fix/cf-1/schema_history.jsonl"
    assert again.backend.options == d.backend.options
    assert "SK" not in d.display and "AK" not in d.display and "xxxxx" in d.display
    folder, name = split_location(loc)
    assert name == "schema_history.jsonl" and folder.backend.root == "bucket/pre/fix/cf-1"
    assert isinstance(open_history_store(loc), StateSchemaHistoryStore)
    # Picklable for executors, without its live file-system object.
    assert pickle.loads(pickle.dumps(d)).backend.root == "bucket/pre/fix"


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("hdfs://nn:8020/state", "scheme 'hdfs' is not supported"),
        ("s3a://bucket/state", "scheme 's3a' is not supported"),
        ("s3://bucket/state?endpoint=http://x&acces-key=a", "unknown sink URI parameter(s) 'acces-key'"),
        ("s3://bucket/state?access-key=only", "access-key and secret-access-key must be given together"),
        ("s3:///state", "has no bucket"),
        ("", "the data dir is empty"),
    ],
)
def test_a_bad_data_dir_url_is_refused_with_one_line_naming_it(location: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        StateDir.parse(location)
    assert message in e.value.message and "\n" not in e.value.message


def test_a_secret_in_a_refused_url_is_not_printed() -> None:
    with pytest.raises(ConfigError) as e:
        StateDir.parse("s3://bucket/state?secret-access-key=TOPSECRET&access-key=AK&bogus=1")
    assert "TOPSECRET" not in e.value.message and "bogus" in e.value.message


def test_a_data_dir_that_is_a_file_or_cannot_be_created_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(ConfigError, match="is a file, not a directory"):
        StateDir.parse(str(f)).check()
    with pytest.raises(ConfigError, match="cannot create the data dir"):
        StateDir.parse(str(f / "below")).check()
    ok = StateDir.parse(str(tmp_path / "new" / "dir"))
    ok.check()
    assert (tmp_path / "new" / "dir").is_dir()


def test_objects_round_trip_atomically_and_a_corrupt_json_object_says_where(tmp_path: Path) -> None:
    d = StateDir.parse(str(tmp_path / "s"))
    assert d.read_json("a.json") is None and not d.exists("a.json") and d.list() == []
    d.write_json("a.json", {"x": 1})
    d.child("sub").write_bytes("b.bin", b"\x00\x01")
    assert d.read_json("a.json") == {"x": 1} and d.size("sub/b.bin") == 2
    assert sorted(d.list()) == ["a.json", "sub"]
    assert [n for n in os.listdir(tmp_path / "s") if n.startswith(".tmp")] == []
    t = pa.table({"k": ["a", "b"], "v": [b"1", b"2"]})
    d.write_parquet("rows/1.parquet", t)
    assert d.read_parquet("rows/1.parquet").equals(t)
    (tmp_path / "s" / "bad.json").write_text("{not json")
    with pytest.raises(StateStorageError, match=r"bad\.json in the data dir is not valid JSON"):
        d.read_json("bad.json")
    d.remove_tree("sub")
    assert not d.exists("sub/b.bin")


def test_the_spark_checkpoint_is_in_a_local_data_dir_and_driver_local_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = StateDir.parse(str(tmp_path / "s")).child("cf")
    assert spark_checkpoint_location(local, "cf") == str(tmp_path / "s" / "cf" / "spark")
    root = str(tmp_path / "ckpt")
    remote = StateDir.parse("s3://b/p?access-key=a&secret-access-key=s").child("cf")
    other = StateDir.parse("s3://b/q?access-key=a&secret-access-key=s").child("cf")
    loc = spark_checkpoint_location(remote, "cf", root)
    assert loc.startswith(str(tmp_path / "ckpt" / "cf-")) and loc != spark_checkpoint_location(
        other, "cf", root
    )


def test_a_local_history_location_is_the_fsynced_jsonl_file(tmp_path: Path) -> None:
    store = open_history_store(str(tmp_path / "h.jsonl"))
    assert isinstance(store, FileSchemaHistoryStore)


def test_the_object_history_store_appends_and_drops_a_torn_tail(tmp_path: Path) -> None:
    d = StateDir.parse(str(tmp_path / "s"))
    store = StateSchemaHistoryStore(d, "h.jsonl")
    assert store.load() == []
    store.append([{"a": 1}])
    store.append([{"b": 2}, {"c": 3}])
    assert store.load() == [{"a": 1}, {"b": 2}, {"c": 3}]
    d.write_bytes("h.jsonl", (d.read_bytes("h.jsonl") or b"") + b'{"torn":')
    assert store.load() == [{"a": 1}, {"b": 2}, {"c": 3}]
    store.append([{"d": 4}])
    assert store.load() == [{"a": 1}, {"b": 2}, {"c": 3}, {"d": 4}]


def test_remove_deletes_one_object_and_ignores_a_missing_one(tmp_path: Path) -> None:
    d = StateDir.parse(str(tmp_path / "s"))
    d.write_bytes("p", b"x")
    d.remove("p")
    d.remove("p")
    assert not d.exists("p")


def test_a_child_shows_its_own_location_and_shares_the_spark_checkpoint_of_its_parsed_location(
    tmp_path: Path,
) -> None:
    remote = StateDir.parse("s3://b/p?access-key=a&secret-access-key=TOPSECRET").child("cf").child("epoch-2")
    assert remote.display.startswith("s3://b/p/cf/epoch-2?") and "TOPSECRET" not in remote.display
    again = StateDir.parse(remote.location)
    assert again.display == remote.display
    assert spark_checkpoint_location(remote, "cf") == spark_checkpoint_location(again, "cf")
    local = StateDir.parse(str(tmp_path)).child("cf")
    assert local.display == str(tmp_path / "cf")
