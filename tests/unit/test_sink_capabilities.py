"""Each sink declares what it can do in one place (``Sink.capabilities``); the pipeline reads only that."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.sink import create_sink
from sparkcdc.sink.base import RECORD_EVERY_S, WATERMARK_EVERY_S, SinkCapabilities
from sparkcdc.sink.storage.sink import METADATA_MIN_INTERVAL

SRC = Path(__file__).resolve().parents[2] / "src" / "sparkcdc"

KEY_DISPATCH = """
[[sink.dispatchers]]
matcher = ["*.*"]
partition = "index-value"
"""


def caps(uri: str, toml: str = "") -> SinkCapabilities:
    return create_sink(uri, ReplicaConfig.from_toml(toml) if toml else ReplicaConfig(), "cf-1").capabilities


def test_storage_writes_segments_in_parallel_and_declares_its_marks(tmp_path: Path) -> None:
    local = caps(f"file://{tmp_path}/out?protocol=csv")
    assert local.segments == "parallel" and local.upstream_rendered_csv
    assert local.executors_write_files is not None and local.executors_write_files.root == f"{tmp_path}/out"
    assert "metadata" in local.resume_evidence and local.idempotence
    remote = caps("s3://bucket/out?protocol=canal-json&endpoint=http://127.0.0.1:1")
    assert remote.executors_write_files is None and not remote.upstream_rendered_csv


def test_kafka_takes_turns_and_routes_by_row_only_under_a_key_dispatcher() -> None:
    by_table = caps("kafka://127.0.0.1:9092/t?protocol=canal-json")
    assert by_table.segments == "turns" and not by_table.route_depends_on_row
    # without acknowledgements a turn could pass before the earlier messages are in the log
    assert caps("kafka://127.0.0.1:9092/t?protocol=canal-json&required-acks=0").segments == "serial"
    assert caps("kafka://127.0.0.1:9092/t?protocol=canal-json&required-acks=1").segments == "turns"
    assert "watermark" in by_table.resume_evidence
    assert by_table.idempotence == ""  # consumers drop repeats by watermark
    assert caps("kafka://127.0.0.1:9092/t?protocol=canal-json", KEY_DISPATCH).route_depends_on_row


@pytest.mark.parametrize(
    ("uri", "evidence"),
    [
        ("mysql://root@127.0.0.1:3306/", "progress table"),
        ("mysql://root@127.0.0.1:3306/?progress-table=false", ""),
        ("http://127.0.0.1:1/hook", ""),
    ],
)
def test_row_sinks_take_rows(uri: str, evidence: str) -> None:
    c = caps(uri)
    assert c.segments == "rows" and c.executors_write_files is None
    assert (evidence in c.resume_evidence) if evidence else c.resume_evidence == ""


@pytest.mark.parametrize(
    ("uri", "every_s"),
    [
        # a watermark on every mark: every upstream second
        ("kafka://127.0.0.1:9092/t?protocol=canal-json&enable-tidb-extension=true", WATERMARK_EVERY_S),
        (
            "kafka://127.0.0.1:9092/t?protocol=avro&schema-registry=http://127.0.0.1:1"
            "&enable-tidb-extension=true&avro-enable-watermark=true",
            WATERMARK_EVERY_S,
        ),
        ("http://127.0.0.1:1/hook?enable-tidb-extension=true", WATERMARK_EVERY_S),
        # the storage sink's metadata, at most every 2 s
        ("file:///tmp/out?protocol=csv", METADATA_MIN_INTERVAL),
        # nothing published: only the checkpoint the server shows moves
        ("kafka://127.0.0.1:9092/t?protocol=canal-json", RECORD_EVERY_S),
        (
            "kafka://127.0.0.1:9092/t?protocol=avro&schema-registry=http://127.0.0.1:1&enable-tidb-extension=true",
            RECORD_EVERY_S,
        ),
        ("http://127.0.0.1:1/hook", RECORD_EVERY_S),
        ("mysql://root@127.0.0.1:3306/", RECORD_EVERY_S),
        ("iceberg:///tmp/wh?mode=changelog", RECORD_EVERY_S),
    ],
)
def test_an_idle_changefeed_is_marked_as_often_as_its_sink_publishes(uri: str, every_s: float) -> None:
    assert caps(uri).resolved_every_s == every_s
    assert WATERMARK_EVERY_S == 1.0 and RECORD_EVERY_S == METADATA_MIN_INTERVAL == 2.0


@pytest.mark.parametrize("fmt", ["iceberg", "delta"])
def test_lakehouse_tables_carry_their_tag(fmt: str, tmp_path: Path) -> None:
    c = caps(f"{fmt}://{tmp_path}/wh?mode=changelog")
    assert c.segments == "rows" and "tag" in c.resume_evidence and "tag" in c.idempotence


@pytest.mark.parametrize(
    "rel",
    [
        "pipeline/changefeed.py",
        "pipeline/writer.py",
        "pipeline/snapshot/run.py",
        "pipeline/snapshot/write.py",
    ],
)
def test_the_pipeline_reads_no_sink_settings(rel: str) -> None:
    """No ``getattr(sink, "settings")`` or sink class attributes: the capabilities are the one answer."""
    tree = ast.parse((SRC / rel).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr":
            args = [a.value for a in node.args if isinstance(a, ast.Constant)]
            assert "settings" not in args, f"{rel}:{node.lineno} probes a sink's settings"
        if isinstance(node, ast.Attribute):
            assert node.attr not in {"parallel_segments", "serial_segments"}, f"{rel}:{node.lineno}"
