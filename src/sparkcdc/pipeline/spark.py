"""The Spark session sparkcdc runs in."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

LOG4J2_CONFIG = Path(__file__).resolve().parent / "log4j2.properties"

_registered: set[int] = set()


def get_spark(
    master: str | None = None, app_name: str = "sparkcdc", conf: dict[str, str] | None = None
) -> Any:
    """A SparkSession (local[*] by default) with the sparkcdc data source registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    master = master or os.environ.get("SPARKCDC_SPARK_MASTER")
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        master = "local[*]"
    if master is not None:
        # Under spark-submit (the JVM is already up) the submit's --master applies unless one is given.
        builder = builder.master(master)
    defaults = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.python.worker.reuse": "true",
        "spark.sql.streaming.stopTimeout": "60s",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.driver.memory": "2g",
        "spark.log.level": "ERROR",
        "spark.sql.streaming.noDataMicroBatches.enabled": "false",
        "spark.sql.adaptive.enabled": "false",
        "spark.executorEnv.PYSPARK_PYTHON": os.environ["PYSPARK_PYTHON"],
    }
    if master is not None and master.startswith("local"):
        # A local Spark talks only to itself: keep the driver on loopback (the variable also keeps
        # the JVM from warning that the host name resolves to a loopback address).
        defaults["spark.driver.host"] = "127.0.0.1"
        defaults["spark.driver.bindAddress"] = "127.0.0.1"
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if "SPARK_CONF_DIR" not in os.environ and "PYSPARK_GATEWAY_PORT" not in os.environ:
        # The driver runs in this process's JVM whatever the master: warnings and errors from the
        # start, without the start-up notes of Spark's default profile.
        defaults["spark.driver.defaultJavaOptions"] = f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()}"
    settings = {**defaults, **(conf or {})}
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(settings["spark.log.level"])
    if id(spark) not in _registered:
        from sparkcdc.pipeline.source import BinlogDataSource

        spark.dataSource.register(BinlogDataSource)
        _registered.add(id(spark))
    return spark
