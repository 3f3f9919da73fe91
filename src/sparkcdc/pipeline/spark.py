"""The Spark session sparkcdc runs in."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

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


PLANNER_MODULES = frozenset(
    {
        "pyspark.sql.worker.lookup_data_sources",
        "pyspark.sql.worker.create_data_source",
        "pyspark.sql.worker.plan_data_source_read",
        "pyspark.sql.worker.data_source_pushdown_filters",
    }
)
"""The Python modules Spark runs on the driver to plan a Python data source (before a query's first batch)."""


def release_planner_workers(spark: Any) -> list[str]:
    """Stop the Python daemons and idle workers Spark keeps after planning a Python data source.

    Spark starts a daemon and a worker for each planning step (``PLANNER_MODULES``: about 240 MB
    PSS together) and keeps them for reuse, while a streaming query plans only at its start. A
    stopped factory starts its daemon again when it is next used (a query's restart), so this only
    frees memory; it must not run while a query is being planned (``sparkcdc run``, one query, calls
    it once its first batch committed). Spark keeps the factories in a private field of
    ``SparkEnv``: on a Spark without it, nothing is stopped. Returns the modules stopped.
    """
    stopped: list[str] = []
    try:
        # Everything through java.lang.reflect: py4j's own lookup of SparkEnv's methods loads classes
        # a pyspark install may not ship (protobuf), which breaks the gateway connection.
        jvm = spark.sparkContext._jvm
        gateway = spark.sparkContext._gateway
        no_args = gateway.new_array(jvm.java.lang.Object, 0)
        no_types = gateway.new_array(jvm.java.lang.Class, 0)
        forname = jvm.java.lang.Class.forName

        def call(obj: Any, cls: str, method: str) -> Any:
            return forname(cls).getMethod(method, no_types).invoke(obj, no_args)

        module_cls = forname("org.apache.spark.SparkEnv$")
        holder = module_cls.getDeclaredField("env")  # the object SparkEnv's current env
        holder.setAccessible(True)
        env = holder.get(module_cls.getDeclaredField("MODULE$").get(None))
        field = forname("org.apache.spark.SparkEnv").getDeclaredField("pythonWorkers")
        field.setAccessible(True)
        factories = []
        it = call(field.get(env), "scala.collection.IterableOnce", "iterator")
        while call(it, "scala.collection.Iterator", "hasNext"):
            entry = call(it, "scala.collection.Iterator", "next")
            key = call(entry, "scala.Tuple2", "_1")
            module = str(call(key, "org.apache.spark.SparkEnv$PythonWorkersKey", "workerModule"))
            if module in PLANNER_MODULES:
                factories.append((module, call(entry, "scala.Tuple2", "_2")))
        for module, factory in factories:
            call(factory, "org.apache.spark.api.python.PythonWorkerFactory", "stop")
            stopped.append(module)
    except Exception:  # a Spark version without the field, or a changed key: keep the processes
        log.debug("planner workers not released", exc_info=True)
    return stopped
