"""Spark's planner processes of a Python data source are stopped on request, and come back when needed.

A real local Spark plans a batch read of a Python data source (the ``lookup_data_sources``,
``create_data_source`` and ``plan_data_source_read`` daemons and workers start and stay);
``release_planner_workers`` stops exactly those, the executors' worker daemon stays, and the
next read of the source starts the planner processes again and reads the same rows.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from sparkcdc.pipeline.spark import PLANNER_MODULES, release_planner_workers

pytestmark = pytest.mark.spark


class _Reader(DataSourceReader):
    def read(self, partition: InputPartition) -> Iterator[tuple[int]]:
        yield from ((i,) for i in range(3))


class _Source(DataSource):
    @classmethod
    def name(cls) -> str:
        return "planner_release_probe"

    def schema(self) -> str:
        return "x int"

    def reader(self, schema: Any) -> _Reader:
        return _Reader()


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from pyspark import cloudpickle

    from sparkcdc.pipeline.spark import get_spark

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    session = get_spark("local[1]")
    session.dataSource.register(_Source)
    yield session
    session.stop()
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def _python_modules() -> list[str]:
    """The module each Python process under this one runs (``python -m pyspark.daemon <module>``)."""
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            cmd = p.cmdline()
        except psutil.Error:
            continue
        if "pyspark.daemon" in cmd:
            rest = cmd[cmd.index("pyspark.daemon") + 1 :]
            out.append(rest[0] if rest else "pyspark.worker")
    return out


def _read(spark: Any) -> list[int]:
    return sorted(r.x for r in spark.read.format("planner_release_probe").load().collect())


def test_planner_processes_stopped_then_started_again(spark: Any) -> None:
    assert _read(spark) == [0, 1, 2]
    before = _python_modules()
    planning = {m for m in before if m in PLANNER_MODULES}
    assert "pyspark.sql.worker.create_data_source" in planning
    assert "pyspark.sql.worker.plan_data_source_read" in planning

    stopped = release_planner_workers(spark)

    assert set(stopped) == planning
    after = []
    for _ in range(50):  # the daemons exit on SIGTERM, their workers with them
        after = _python_modules()
        if not any(m in PLANNER_MODULES for m in after):
            break
        time.sleep(0.1)
    assert not any(m in PLANNER_MODULES for m in after), after
    assert "pyspark.worker" in after  # the executors' daemon is not a planner's

    assert _read(spark) == [0, 1, 2]
    assert "pyspark.sql.worker.plan_data_source_read" in _python_modules()
