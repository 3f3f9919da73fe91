"""The Spark session sparkcdc runs in."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sparkcdc.errors import ConfigError

log = logging.getLogger(__name__)

LOG4J2_CONFIG = Path(__file__).resolve().parent / "log4j2.properties"

DRIVER_JAVA_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xms64m"
"""JVM options of a driver sparkcdc starts: the serial collector, the C1 compiler only, a small initial
heap. The driver JVM plans batches and moves segment descriptions, little per row; on 2 cores a
one-row run started 1.3 s sooner and peaked 80 MB lower with them (bench/startup)."""

CDS_ENV = "SPARKCDC_JVM_CACHE"
"""Where the driver JVM's class data archive is kept (default ``~/.cache/sparkcdc``; ``off``: none)."""

_CDS_CHECKED = "-XX:+VerifySharedSpaces -Xlog:cds=off -Xlog:cds+dynamic=off"
"""Archives carry a checksum of their content, checked when mapped (a changed archive is not used);
the JVM says nothing of them."""


_pending_archive: list[tuple[Path, Path]] = []
"""(being written, final) of the class data archive this process's driver JVM writes as it exits."""


def _cds_options(write: bool) -> str:
    """Class data sharing for the driver JVM: Spark's classes loaded from an archive of an earlier run.

    When a Spark and Java install has no archive yet and ``write``, the driver JVM writes one as it exits
    (``-XX:ArchiveClassesAtExit``, a file named after this process); ``keep_class_archive`` waits for that
    JVM and keeps the file only if it exited normally (a torn archive could crash a later JVM).
    Later starts map it (``-XX:SharedArchiveFile``), which took a bare session's start from 4.1 to
    2.4 s on 2 cores. A JVM ignores an archive that does not match its version and class path.
    """
    import hashlib
    import shutil

    where = os.environ.get(CDS_ENV, "")
    if where.lower() == "off":
        return ""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        return ""
    try:
        import pyspark

        java = os.path.realpath(java)
        key = f"{pyspark.__version__}|{pyspark.__file__}|{java}|{os.stat(java).st_mtime_ns}"
        folder = Path(where or Path.home() / ".cache" / "sparkcdc")
        final = folder / f"spark-driver-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"
        if final.exists():
            return f"-XX:SharedArchiveFile={final} {_CDS_CHECKED}"
        if not write:
            return ""
        folder.mkdir(parents=True, exist_ok=True)
        for tmp in folder.glob(final.name + ".tmp-*"):
            if _alive(int(tmp.name.rsplit("-", 1)[1])):
                return ""  # another process's JVM writes one
            tmp.unlink()  # left by a process that did not see its JVM finish
        tmp = folder / f"{final.name}.tmp-{os.getpid()}"
        _pending_archive[:] = [(tmp, final)]
        return f"-XX:ArchiveClassesAtExit={tmp} {_CDS_CHECKED}"
    except (OSError, ValueError):  # an unwritable cache or a foreign file: start without an archive
        log.debug("no class data archive for the driver JVM", exc_info=True)
        return ""


def keep_class_archive(spark: Any, timeout: float = 120.0) -> None:
    """When this session's JVM writes the class data archive: stop it, wait for it, keep the archive.

    For a process that ends with its session (``sparkcdc run``); does nothing otherwise.
    """
    if not _pending_archive:
        return
    tmp, final = _pending_archive.pop()
    code = None
    try:
        proc = spark.sparkContext._gateway.proc
        spark.stop()
        proc.stdin.close()  # the gateway exits when its stdin closes, and writes the archive then
        code = proc.wait(timeout)
    except Exception:  # a JVM that does not exit in time: its archive is not trusted
        log.debug("driver JVM did not exit", exc_info=True)
    if code == 0 and tmp.exists() and tmp.stat().st_size:
        os.replace(tmp, final)
        log.debug("class data archive for the next driver JVM: %s", final)
    else:
        tmp.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def driver_java_options(write_class_archive: bool = False) -> str:
    """The JVM options of a driver sparkcdc starts (``DRIVER_JAVA_OPTIONS`` and class data sharing).

    ``write_class_archive``: without an archive yet, this JVM writes one (``keep_class_archive``).
    """
    return f"{DRIVER_JAVA_OPTIONS} {_cds_options(write_class_archive)}".strip()


_registered: set[int] = set()


class _NumpyProbe:
    """A py4j input converter for NumPy values that does not import NumPy to look.

    PySpark registers converters for NumPy arrays and scalars that every py4j call asks about each
    argument; to answer, they import ``pyspark.testing.utils``, which imports pandas: 45 MB more
    resident memory and 0.2 s in a driver that never hands NumPy values to the JVM. This asks them
    only about NumPy values (an object can only be one once NumPy is imported).
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def can_convert(self, obj: Any) -> bool:
        # NumPy may be half imported by another thread (changefeeds starting at once): its module is
        # in sys.modules before its types are; no object can be a NumPy value before they exist.
        np = sys.modules.get("numpy")
        array, scalar = getattr(np, "ndarray", None), getattr(np, "generic", None)
        if array is None or scalar is None:
            return False
        return isinstance(obj, (array, scalar)) and bool(self.inner.can_convert(obj))

    def convert(self, obj: Any, gateway_client: Any) -> Any:
        return self.inner.convert(obj, gateway_client)


def _guard_numpy_converters() -> None:
    """Wrap PySpark's NumPy converters in ``_NumpyProbe`` (once; the answers are unchanged)."""
    from py4j import protocol
    from pyspark.sql.types import NumpyArrayConverter, NumpyScalarConverter

    for i, conv in enumerate(protocol.INPUT_CONVERTER):
        if isinstance(conv, (NumpyArrayConverter, NumpyScalarConverter)):
            protocol.INPUT_CONVERTER[i] = _NumpyProbe(conv)


def get_spark(
    master: str | None = None,
    app_name: str = "sparkcdc",
    conf: dict[str, str] | None = None,
    write_class_archive: bool = False,
) -> Any:
    """A SparkSession (local[*] by default) with the sparkcdc data source registered.

    ``write_class_archive``: the caller ends with ``keep_class_archive`` (see ``driver_java_options``).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    _guard_numpy_converters()
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
        # A Python process Spark starts (a streaming source's runner, a worker) connects back and
        # authenticates within this; 15 s by default, which several queries starting at once on a
        # busy 2-core host exceed (each then fails its query with CANNOT_OPEN_SOCKET).
        "spark.python.authenticate.socketTimeout": "60s",
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
        defaults["spark.driver.defaultJavaOptions"] = (
            f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()} {driver_java_options(write_class_archive)}"
        )
    settings = {**defaults, **(conf or {})}
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(settings["spark.log.level"])
    use_filesystem_checkpoints(spark)
    if id(spark) not in _registered:
        from sparkcdc.pipeline.source import BinlogDataSource

        register_data_source(spark, BinlogDataSource)
        _registered.add(id(spark))
    return spark


RUNNER_SITE = Path(__file__).with_name("runner_site")
"""The folder of the ``sitecustomize`` of the processes Spark starts for a registered source."""


def register_data_source(spark: Any, source: Any) -> None:
    """``spark.dataSource.register(source)``, with the source's environment in a concurrent map.

    Every Python function Spark derives from a registered data source (one per query, per
    batch's reader) shares the registered function's environment map, and each streaming
    query's source runner, as it starts on the driver, puts its variables into that map
    (``PythonStreamingSourceRunner.init``: ``SPARK_LOCAL_DIRS``, ``SPARK_BUFFER_SIZE`` …) without
    a lock. PySpark makes it a ``java.util.HashMap``. Under a server, queries start on several
    threads while the scheduler serializes other queries' tasks, whose reader holds that map: two
    puts at once can leave the map's size unequal to its entries, and from then on every task
    that reads the source fails to deserialize (``java.io.OptionalDataException``), so a
    changefeed whose sink reads rows from the source fails after its retries. A
    ``ConcurrentHashMap`` takes concurrent puts and serializes without a size.

    The environment puts ``RUNNER_SITE`` on the ``PYTHONPATH`` of every Python process Spark
    starts for the source, ahead of Python's own paths (its ``sitecustomize`` keeps PyArrow out of
    each streaming query's source runner: see that module).
    """
    from pyspark.core.rdd import _prepare_for_python_RDD

    sc = spark.sparkContext
    jvm = sc._jvm
    pickled, broadcast_vars, env, includes = _prepare_for_python_RDD(sc, source)
    # A copy: ``env`` is the context's own map, which every other Python function also takes.
    env = {**env, "PYTHONPATH": os.pathsep.join(p for p in (str(RUNNER_SITE), env.get("PYTHONPATH")) if p)}
    function = jvm.SimplePythonFunction(
        bytearray(pickled),
        jvm.java.util.concurrent.ConcurrentHashMap(env),
        includes,
        sc.pythonExec,
        sc.pythonVer,
        broadcast_vars,
        sc._javaAccumulator,
    )
    data_source = getattr(
        jvm, "org.apache.spark.sql.execution.datasources.v2.python.UserDefinedPythonDataSource"
    )(function)
    spark._jsparkSession.dataSource().registerPython(source.name(), data_source)


CHANGEFEED_TASKS_KEY = "spark.sparkcdc.changefeedTasks"
"""How many Spark tasks one changefeed's batch runs at once (segments, writers, snapshot ranges).

Unset, Spark's default parallelism: every task slot, which is right for ``sparkcdc run`` (one
changefeed). A server sets it below its slots (``server.runner.server_spark_conf``), so that the
changefeeds whose sinks hang in a request cannot hold every slot between them."""

SCHEDULER_POOL_KEY = "spark.scheduler.pool"


def changefeed_tasks(spark: Any) -> int:
    """The task slots one changefeed's batch may use (``CHANGEFEED_TASKS_KEY``), at least 1."""
    slots = max(1, int(spark.sparkContext.defaultParallelism))
    raw = spark.conf.get(CHANGEFEED_TASKS_KEY, None)
    if raw is None:
        return slots
    try:
        cap = int(str(raw).strip())
    except ValueError:
        cap = 0
    if cap < 1:
        raise ConfigError(
            f"invalid --spark-conf {CHANGEFEED_TASKS_KEY}={raw}: give a whole number of tasks, at least 1"
        )
    return min(cap, slots)


def use_changefeed_pool(spark: Any, changefeed_id: str) -> None:
    """Run this thread's next Spark jobs and streaming query in the changefeed's own scheduler pool.

    Under ``spark.scheduler.mode=FAIR`` (a server's default) a free task slot goes to the pool
    with the fewest running tasks, so a changefeed with a batch waiting is not queued behind
    another changefeed's whole batch. A streaming query keeps the pool of the thread that started
    it, for every batch (its ``foreachBatch`` jobs included). Harmless under FIFO.
    """
    spark.sparkContext.setLocalProperty(SCHEDULER_POOL_KEY, f"sparkcdc-{changefeed_id}")


PLANNER_MODULES = frozenset(
    {
        "pyspark.sql.worker.lookup_data_sources",
        "pyspark.sql.worker.create_data_source",
        "pyspark.sql.worker.plan_data_source_read",
        "pyspark.sql.worker.data_source_pushdown_filters",
    }
)
"""The Python modules Spark runs on the driver to plan a Python data source (before a query's first batch)."""


CHECKPOINT_FILE_MANAGER_KEY = "spark.sql.streaming.checkpointFileManagerClass"
CHECKPOINT_FILE_MANAGERS = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
    "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager",
)
"""Spark's checkpoint file manager over Hadoop's ``FileSystem`` API, where Spark 4.1+ and 4.0 keep it."""


def use_filesystem_checkpoints(spark: Any) -> str | None:
    """Write the streaming offset and commit logs through ``FileSystem`` (unless configured otherwise).

    Spark's default manager goes through ``FileContext``, which on a local disk without Hadoop's
    native library runs ``chmod`` and ``readlink`` as child processes of the driver JVM for every
    log file: several forks of the JVM per micro-batch, the larger part of what an idle changefeed
    cost (bench/density). The ``FileSystem`` manager renames its temporary file into place, which
    is atomic on a local disk. Returns the class set, None when it was left alone.
    """
    if spark.conf.get(CHECKPOINT_FILE_MANAGER_KEY, None):
        return None
    forname = spark.sparkContext._jvm.java.lang.Class.forName
    for name in CHECKPOINT_FILE_MANAGERS:
        try:
            forname(name)
        except Exception:  # not in this Spark: the next place
            continue
        spark.conf.set(CHECKPOINT_FILE_MANAGER_KEY, name)
        return name
    return None


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


def map_in_arrow(df: Any, func: Any, schema: Any) -> Any:
    """``df.mapInArrow(func, schema)``, without importing pandas in the driver.

    PySpark's ``mapInArrow`` builds its UDF through ``pandas_udf``, whose first step is a pandas
    version check, an import of pandas (45 MB resident in a driver that has no other use for it);
    the UDF it then builds is this one.
    """
    from pyspark.sql import DataFrame
    from pyspark.sql.udf import UserDefinedFunction
    from pyspark.util import PythonEvalType

    udf = UserDefinedFunction(func, returnType=schema, evalType=PythonEvalType.SQL_MAP_ARROW_ITER_UDF)
    column = udf(*[df[c] for c in df.columns])
    return DataFrame(df._jdf.mapInArrow(column._jc, False, None), df.sparkSession)


def _no_messages(batches: Iterator[Any]) -> Iterator[Any]:
    """The warm-up job's task function: reads its input and yields nothing."""
    for _ in batches:
        pass
    return iter(())


def warm_up_writers(spark: Any) -> float:
    """Run one Arrow task of the writers' shape (``spark.range`` → ``mapInArrow`` → ``collect``); its seconds.

    A session's first such job starts the executors' Python daemon and loads the JVM's Arrow and
    Python runner classes: 2.2 s on a quiet two-core machine, against 0.15–0.2 s for each later
    batch with rows (bench/density). Paid at the session's start, that cost no longer lands on the
    first row a changefeed captures.
    """
    t0 = time.monotonic()
    map_in_arrow(spark.range(0, 1, 1, 1), _no_messages, "msg string").collect()
    return time.monotonic() - t0
