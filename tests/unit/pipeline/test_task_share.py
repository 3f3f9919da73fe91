"""One changefeed's share of the task slots, and its own scheduler pool, in a real Spark session."""

from __future__ import annotations

import time
from typing import Any

import pytest

from sparkcdc.errors import ConfigError
from sparkcdc.pipeline.spark import (
    CHANGEFEED_TASKS_KEY,
    SCHEDULER_POOL_KEY,
    changefeed_tasks,
    get_spark,
    use_changefeed_pool,
)

pytestmark = pytest.mark.spark


def test_a_changefeed_runs_at_most_its_share_of_the_slots() -> None:
    spark = get_spark("local[2]")
    slots = int(spark.sparkContext.defaultParallelism)
    try:
        spark.conf.unset(CHANGEFEED_TASKS_KEY)
        assert changefeed_tasks(spark) == slots  # `sparkcdc run`: every slot
        spark.conf.set(CHANGEFEED_TASKS_KEY, "1")
        assert changefeed_tasks(spark) == 1
        spark.conf.set(CHANGEFEED_TASKS_KEY, str(slots + 5))
        assert changefeed_tasks(spark) == slots  # never more than the session has
        for bad in ("0", "two", "-1"):
            spark.conf.set(CHANGEFEED_TASKS_KEY, bad)
            with pytest.raises(ConfigError, match=rf"{CHANGEFEED_TASKS_KEY}={bad}: give a whole number"):
                changefeed_tasks(spark)
    finally:
        spark.conf.unset(CHANGEFEED_TASKS_KEY)


def test_each_query_runs_its_batches_in_the_pool_of_its_changefeed() -> None:
    spark = get_spark("local[2]")
    seen: dict[str, set[str | None]] = {}

    def batches(name: str) -> Any:
        def batch(df: Any, batch_id: int) -> None:
            seen.setdefault(name, set()).add(spark.sparkContext.getLocalProperty(SCHEDULER_POOL_KEY))
            df.count()

        return batch

    queries = []
    try:
        for name in ("cf-a", "cf-b"):
            use_changefeed_pool(spark, name)
            queries.append(
                spark.readStream.format("rate")
                .option("rowsPerSecond", 5)
                .load()
                .writeStream.foreachBatch(batches(name))
                .trigger(processingTime="100 milliseconds")
                .start()
            )
        deadline = time.monotonic() + 60
        while len(seen) < 2 and time.monotonic() < deadline and all(q.isActive for q in queries):
            time.sleep(0.1)
    finally:
        for q in queries:
            q.stop()
        spark.sparkContext.setLocalProperty(SCHEDULER_POOL_KEY, None)
    assert seen == {"cf-a": {"sparkcdc-cf-a"}, "cf-b": {"sparkcdc-cf-b"}}
