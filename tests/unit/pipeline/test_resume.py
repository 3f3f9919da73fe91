"""The start point from a changefeed's durable records (``pipeline.resume``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.errors import ConfigError
from sparkcdc.pipeline.resume import (
    EVIDENCE_CODE,
    Evidence,
    drop_stale_spark_log,
    newer_end,
    newest,
    spark_log_end,
)


def end(file: str, pos: int, ts: int) -> dict[str, Any]:
    return {"file": file, "pos": pos, "ts": ts}


def ev(source: str, file: str, pos: int, ts: int) -> Evidence:
    return Evidence(source, end(file, pos, ts), ts)


def test_the_newest_record_wins_by_position_then_chain_state() -> None:
    meta = ev("the meta database", "bin.000002", 900, 50)
    older_file = ev("checkpoint.json of epoch-1", "bin.000001", 99999, 40)
    raised = ev("checkpoint.json of epoch-2", "bin.000002", 900, 70)  # an idle batch: same position
    assert newest([meta, older_file]) is meta
    assert newest([meta, raised, older_file]) is raised
    assert newest([]) is None


def test_of_equal_records_the_first_given_wins() -> None:
    a, b = ev("the meta database", "bin.000002", 900, 50), ev("checkpoint.json", "bin.000002", 900, 50)
    assert newest([a, b]) is a and newest([b, a]) is b


@pytest.mark.parametrize(
    "other",
    [
        ev("checkpoint.json of epoch-1", "other-bin.000009", 4, 10),  # another binlog base name
        ev("checkpoint.json of epoch-1", "bin.000003", 4, 10),  # a later position, an older chain state
    ],
)
def test_records_that_cannot_come_from_one_changefeed_refuse_the_start_naming_both(other: Evidence) -> None:
    meta = ev("the meta database", "bin.000002", 900, 50)
    with pytest.raises(ConfigError) as err:
        newest([meta, other])
    assert err.value.code == EVIDENCE_CODE
    assert "the meta database (bin.000002:900@50)" in err.value.message
    assert f"{other.end['file']}:{other.end['pos']}" in err.value.message


def test_newer_end_keeps_the_first_of_equal_offsets_and_skips_none() -> None:
    a, b = end("bin.000002", 900, 50), end("bin.000002", 900, 50)
    assert newer_end(a, b) is a
    assert newer_end(None, b) is b and newer_end(a, None) is a and newer_end(None, None) is None
    assert newer_end(a, end("bin.000002", 900, 51))["ts"] == 51  # type: ignore[index]
    assert newer_end(end("bin.000003", 4, 60), a)["file"] == "bin.000003"  # type: ignore[index]


def spark_log(folder: Path, ends: list[dict[str, Any]]) -> None:
    """Spark's offset log as Spark writes it: v1, the batch metadata, one line per source."""
    (folder / "offsets").mkdir(parents=True)
    (folder / "commits").mkdir()
    for batch, e in enumerate(ends):
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}}
        (folder / "offsets" / str(batch)).write_text(
            f"v1\n{json.dumps(meta)}\n{json.dumps({**e, 'segments': 1})}"
        )
        (folder / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_spark_log_end_is_the_last_batch_a_half_written_one_ignored(tmp_path: Path) -> None:
    spark = tmp_path / "spark"
    spark_log(spark, [end("bin.000001", 300, 10), end("bin.000001", 700, 20)])
    (spark / "offsets" / "2").write_text("v1\n")  # a crash while Spark wrote it
    got = spark_log_end(str(spark))
    assert got is not None and got.end == end("bin.000001", 700, 20)
    assert got.source == "Spark's offset log (batch 1)"
    assert spark_log_end(str(tmp_path / "none")) is None


def test_a_spark_log_older_than_checkpoint_json_is_moved_aside(tmp_path: Path) -> None:
    """Host A's driver-local log after the changefeed ran on host B: checkpoint.json moved on."""
    spark = tmp_path / "spark"
    spark_log(spark, [end("bin.000001", 300, 10), end("bin.000001", 700, 20)])
    saved = {"checkpoint_ts": 90, "end": end("bin.000004", 120, 90), "rows_total": 7}
    got = drop_stale_spark_log(str(spark), saved)
    assert got is not None and got.end == saved["end"]
    assert not spark.exists()
    (aside,) = [p for p in tmp_path.iterdir() if p.name.startswith("spark.stale-")]
    assert (aside / "offsets" / "1").exists()


@pytest.mark.parametrize(
    "saved_end",
    [
        end("bin.000001", 700, 20),  # the last batch committed
        end("bin.000001", 300, 10),  # the last batch planned, not committed yet: Spark runs it again
    ],
)
def test_a_spark_log_at_or_after_checkpoint_json_is_kept(tmp_path: Path, saved_end: dict[str, Any]) -> None:
    spark = tmp_path / "spark"
    spark_log(spark, [end("bin.000001", 300, 10), end("bin.000001", 700, 20)])
    assert drop_stale_spark_log(str(spark), {"checkpoint_ts": saved_end["ts"], "end": saved_end}) is None
    assert (spark / "offsets" / "1").exists()
    assert drop_stale_spark_log(str(spark), None) is None
