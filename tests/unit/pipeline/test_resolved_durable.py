"""A batch that only raises the chain state is saved before the sink publishes its ts.

Its ts (a resolved ts) becomes the sink's checkpoint, and a later transaction with an older binlog
header gets a commit_ts above it only from an offset that carries the raise: so the offset must be
durable before any consumer sees the ts. The sink here is the real storage sink on a local folder;
what the test adds is a look at the saved state at the moment the sink publishes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.pipeline.writer import BatchResult, BatchWriter
from sparkcdc.sink import create_sink


def _offset_log(spark_dir: Path, batch_id: int, end: dict[str, Any]) -> None:
    (spark_dir / "offsets").mkdir(parents=True, exist_ok=True)
    (spark_dir / "offsets" / str(batch_id)).write_text("v1\n{}\n" + json.dumps(end) + "\n")


def test_a_resolved_batch_is_saved_before_the_sink_publishes_it(tmp_path: Path) -> None:
    sink = create_sink(f"file://{tmp_path / 'out'}?protocol=csv", ReplicaConfig(), "cf")
    saved: list[int] = []
    seen_at_publish: list[list[int]] = []
    publish = sink.commit

    def commit(batch_id: int, messages: list[Any], checkpoint_ts: int) -> None:
        seen_at_publish.append(list(saved))
        publish(batch_id, messages, checkpoint_ts)

    sink.commit = commit  # type: ignore[method-assign]
    committed: list[BatchResult] = []
    writer = BatchWriter(
        sink,
        str(tmp_path / "spark"),
        str(tmp_path / "history.jsonl"),
        "cf",
        committed.append,
        before_resolved=lambda r: saved.append(r.checkpoint_ts),
    )
    resolved = (1_700_000_000_000 << 18) - 1
    _offset_log(
        tmp_path / "spark", 0, {"file": "mysql-bin.000001", "pos": 100, "ts": resolved, "segments": 0}
    )
    writer(None, 0)
    assert seen_at_publish == [[resolved]]
    assert [r.checkpoint_ts for r in committed] == [resolved]
    metadata = json.loads((tmp_path / "out" / "metadata").read_text())
    assert metadata["checkpoint-ts"] == resolved
