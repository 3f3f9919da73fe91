"""Errors cross a real local Spark and come back as the same sparkcdc error (or as unclassified).

Each test raises in Python code that Spark runs (a ``mapInArrow`` function, an RDD
``mapPartitions`` task, a streaming source's ``read``, the driver's ``foreachBatch``) and maps
what the driver gets (the failed ``collect()``, ``query.exception()``) with ``map_spark_error``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.errors import (
    SinkError,
    SinkUnavailable,
    SparkCdcError,
    UnclassifiedError,
    UpstreamUnavailable,
    map_spark_error,
)

pytestmark = pytest.mark.spark

TRICKY = 'sink "x" down: (.+)\\d [retry?]\nsecond line: sparkcdc.errors.SinkError: not this\n{"a": 1} é'


class TableGone(SinkError):
    """A sparkcdc error class defined outside sparkcdc.errors, with an __init__ of its own."""

    code = "CDC:ErrTestTableGone"

    def __init__(self, table: str) -> None:
        super().__init__(f"table {table} is gone")


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from pyspark import cloudpickle

    from sparkcdc.pipeline.spark import get_spark

    # Spark's workers cannot import this test module: ship its functions and classes by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    session = get_spark("local[1]")
    yield session
    session.stop()
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def failure_of(action: Any) -> SparkCdcError:
    with pytest.raises(Exception) as info:
        action()
    assert not isinstance(info.value, SparkCdcError)  # Spark's own exception, carrying the error as text
    return map_spark_error(info.value)


def raise_in_arrow(make: Callable[[], BaseException]) -> Any:
    """A mapInArrow function raising ``make()`` (made in the task, as a real error is)."""

    def fn(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            raise make()
            yield batch

    return fn


def raise_in_partition(make: Callable[[], BaseException]) -> Any:
    """An RDD mapPartitions function raising ``make()``."""

    def fn(rows: Iterator[Any]) -> Iterator[Any]:
        for row in rows:
            raise make()
            yield row

    return fn


@pytest.mark.parametrize(
    "make",
    [
        lambda: SinkUnavailable(TRICKY),
        lambda: UpstreamUnavailable("upstream restarting"),
        lambda: TableGone("app.t"),
    ],
    ids=["SinkUnavailable", "UpstreamUnavailable", "TableGone"],
)
def test_an_error_in_a_map_in_arrow_task_keeps_class_code_flag_and_message(
    spark: Any, make: Callable[[], SparkCdcError]
) -> None:
    err = make()
    back = failure_of(lambda: spark.range(3).mapInArrow(raise_in_arrow(make), "id long").collect())
    assert type(back) is type(err)
    assert (back.code, back.transient, back.message) == (err.code, err.transient, err.message)


def test_an_error_in_an_rdd_task_keeps_class_code_flag_and_message(spark: Any) -> None:
    def make() -> SinkError:
        return SinkError(TRICKY, code="CDC:ErrSinkSpecific")

    rdd = spark.sparkContext.parallelize([1, 2, 3], 2).mapPartitions(raise_in_partition(make))
    back = failure_of(rdd.collect)
    assert type(back) is SinkError
    assert (back.code, back.transient, back.message) == ("CDC:ErrSinkSpecific", False, TRICKY)


def test_a_plain_error_in_a_task_is_unclassified(spark: Any) -> None:
    rdd = spark.sparkContext.parallelize([1], 1).mapPartitions(
        raise_in_partition(lambda: ValueError("plain boom"))
    )
    back = failure_of(rdd.collect)
    assert type(back) is UnclassifiedError and back.code == "CDC:ErrUnknown" and back.transient
    assert back.message == "ValueError: plain boom"
    back = failure_of(
        lambda: spark.range(1).mapInArrow(raise_in_arrow(lambda: KeyError("k")), "id long").collect()
    )
    assert type(back) is UnclassifiedError and back.message == "KeyError: 'k'"


def _die(_rows: Any) -> Any:
    import os

    os._exit(3)  # the Python worker dies as a killed or crashed one does
    yield  # pragma: no cover


def test_a_python_worker_that_dies_is_a_passing_fault(spark: Any) -> None:
    """Spark's own report of a lost worker carries no sparkcdc error: it is recognised as a passing
    fault (retried until --error-stuck-seconds), not an unrecognised error failed after five tries."""
    from sparkcdc.errors import SparkWorkerLost

    back = failure_of(spark.sparkContext.parallelize([1], 1).mapPartitions(_die).collect)
    assert type(back) is SparkWorkerLost and back.transient and back.code == "CDC:ErrSparkWorkerLost"
    assert back.message.startswith("a Spark Python worker died: ")


def _streaming_source(spark: Any) -> None:
    """A streaming source ``errsrc`` whose ``read`` raises what its ``fail`` option names."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    class Reader(DataSourceStreamReader):
        def __init__(self, options: dict[str, str]) -> None:
            self.options = options

        def initialOffset(self) -> dict[str, int]:
            return {"o": 0}

        def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
            return {"o": 1}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
            return [InputPartition(0)]

        def read(self, partition: InputPartition) -> Iterator[tuple[int]]:
            if self.options.get("fail") == "read":
                raise UpstreamUnavailable(TRICKY)
            yield (1,)

        def commit(self, end: dict[str, int]) -> None:
            pass

    class Source(DataSource):
        @classmethod
        def name(cls) -> str:
            return "errsrc"

        def schema(self) -> str:
            return "v long"

        def streamReader(self, schema: Any) -> Reader:
            return Reader(dict(self.options))

    spark.dataSource.register(Source)


def _query_failure(spark: Any, tmp_path: Path, fail: str, on_batch: Any) -> SparkCdcError:
    _streaming_source(spark)
    query = (
        spark.readStream.format("errsrc")
        .option("fail", fail)
        .load()
        .writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        with pytest.raises(Exception):  # noqa: B017 (Spark's StreamingQueryException)
            query.awaitTermination(120)
        exc = query.exception()
        assert exc is not None and not isinstance(exc, SparkCdcError)
        return map_spark_error(exc)
    finally:
        query.stop()


def test_an_error_in_a_streaming_source_read_reaches_query_exception(spark: Any, tmp_path: Path) -> None:
    def on_batch(df: Any, batch_id: int) -> None:
        df.collect()

    back = _query_failure(spark, tmp_path, "read", on_batch)
    assert type(back) is UpstreamUnavailable
    assert (back.code, back.transient, back.message) == ("CDC:ErrUpstreamUnavailable", True, TRICKY)


def test_the_driver_error_raised_from_a_task_failure_is_the_one_reported(spark: Any, tmp_path: Path) -> None:
    def on_batch(df: Any, batch_id: int) -> None:
        try:
            df.mapInArrow(raise_in_arrow(lambda: SinkUnavailable("a task failed")), "v long").collect()
        except Exception as exc:
            raise SinkError(f"batch {batch_id} cannot be written") from exc

    back = _query_failure(spark, tmp_path, "", on_batch)
    assert type(back) is SinkError and back.message == "batch 0 cannot be written"


def test_a_jvm_failure_under_the_driver_code_names_its_root_cause(spark: Any, tmp_path: Path) -> None:
    """A job the driver's batch code runs fails in the JVM (here a task raises there; a task that
    cannot be deserialized fails the same way): the error names the JVM's cause, not the
    streaming query's first line ("An exception was raised by the Python Proxy")."""

    def on_batch(df: Any, batch_id: int) -> None:
        df.selectExpr("raise_error('boom in the jvm')").collect()

    back = _query_failure(spark, tmp_path, "", on_batch)
    assert type(back) is UnclassifiedError
    assert "boom in the jvm" in back.message and "\n" not in back.message, back.message
    assert "Python Proxy" not in back.message
