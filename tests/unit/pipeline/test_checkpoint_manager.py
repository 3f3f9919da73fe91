"""Spark's streaming logs go through Hadoop's ``FileSystem`` API, and a query keeps its offsets there.

The ``FileContext`` manager (Spark's default) forks ``chmod`` and ``readlink`` from the driver JVM
for every log file on a local disk; ``get_spark`` picks the ``FileSystem`` manager of the Spark it
runs on. A rate stream with a checkpoint writes its offset and commit logs and restarts from them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkcdc.pipeline.spark import CHECKPOINT_FILE_MANAGER_KEY, CHECKPOINT_FILE_MANAGERS, get_spark

pytestmark = pytest.mark.spark


def test_streaming_logs_use_the_filesystem_manager_and_resume(tmp_path: Path) -> None:
    spark = get_spark("local[1]")
    assert spark.conf.get(CHECKPOINT_FILE_MANAGER_KEY) in CHECKPOINT_FILE_MANAGERS
    seen: list[int] = []

    def run() -> None:
        def batch(df: Any, batch_id: int) -> None:
            seen.append(batch_id)

        q = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", 5)
            .load()
            .writeStream.foreachBatch(batch)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(processingTime="100 milliseconds")
            .start()
        )
        try:
            first = len(seen)
            while len(seen) < first + 3 and q.isActive:
                q.awaitTermination(0.1)  # the query's own wait: returns at once when it stopped
            assert q.exception() is None
        finally:
            q.stop()

    run()
    logged = sorted(int(p.name) for p in (tmp_path / "ckpt" / "commits").iterdir() if p.name.isdigit())
    assert logged and max(seen) - 1 <= logged[-1] <= max(seen)
    before = len(seen)
    run()  # a restart reads the logs back: the batch after the last committed one (a replay or a new one)
    assert seen[before] == logged[-1] + 1
