"""The binlog source's environment map, shared by every query's source runner, takes concurrent
changes while the scheduler serializes it (a real Spark session).

Every Python function Spark derives from a registered data source shares the registered one's
environment map, and each streaming query's source runner puts into it as it starts. PySpark
registers a ``java.util.HashMap``: with queries starting on several threads of a server, the map
could be left with a size unequal to its entries, and every later task reading the source failed
to deserialize (``java.io.OptionalDataException``; seen in ``test_many_changefeeds``). The same
loop as below over PySpark's own registration failed 14 of 300 round trips.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from sparkcdc.pipeline.source import BinlogDataSource
from sparkcdc.pipeline.spark import get_spark

pytestmark = pytest.mark.spark


def _env(spark: Any, name: str) -> Any:
    manager = spark._jsparkSession.sessionState().dataSourceManager()
    return manager.lookupDataSource(name).dataSourceCls().envVars()


def test_the_source_environment_is_a_concurrent_map_that_serializes_while_it_changes() -> None:
    spark = get_spark("local[2]")
    jvm = spark.sparkContext._jvm
    env = _env(spark, BinlogDataSource.name())
    assert env.getClass().getName() == "java.util.concurrent.ConcurrentHashMap"

    function = (
        spark._jsparkSession.sessionState()
        .dataSourceManager()
        .lookupDataSource(BinlogDataSource.name())
        .dataSourceCls()
    )
    stop = threading.Event()

    def put(n: int) -> None:  # source runners starting at once, with keys coming and going
        i = 0
        while not stop.is_set():
            env.put(f"SPARKCDC_TEST_{n}_{i % 64}", str(i))
            i += 1
            if i % 64 == 0:
                for j in range(64):
                    env.remove(f"SPARKCDC_TEST_{n}_{j}")

    threads = [threading.Thread(target=put, args=(n,), daemon=True) for n in range(4)]
    for t in threads:
        t.start()
    try:
        utils = jvm.org.apache.spark.util.Utils
        for _ in range(200):
            back = utils.deserialize(utils.serialize(function))
            assert back.envVars().size() >= 0
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        for key in list(env.keySet().toArray()):
            if str(key).startswith("SPARKCDC_TEST_"):
                env.remove(key)
