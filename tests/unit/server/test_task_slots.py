"""A server's Spark settings: more task slots than cores, FAIR pools, a per-changefeed share.

``tests/e2e/test_slow_sink.py`` shows why: two changefeeds whose HTTP endpoint holds its requests
took both slots of the old ``local[2]`` default, and the CSV changefeeds beside them stopped.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from sparkcdc.pipeline.spark import CHANGEFEED_TASKS_KEY
from sparkcdc.server.main import ServerOptions
from sparkcdc.server.runner import (
    DAEMON_KEY,
    SLOTS_PER_CORE,
    WORKER_DAEMON,
    SparkChangefeedRunner,
    check_spark_master,
    default_server_master,
    host_cores,
    server_spark_conf,
)


def test_the_default_master_has_more_slots_than_cores() -> None:
    cores = host_cores()
    assert default_server_master() == f"local[{SLOTS_PER_CORE * cores}]"
    assert check_spark_master(default_server_master())
    assert ServerOptions().spark_master == default_server_master()
    assert SparkChangefeedRunner().master == default_server_master()
    assert SparkChangefeedRunner("spark://m:7077").master == "spark://m:7077"


@pytest.mark.parametrize("master", ["local[8]", "local[*]", "local", "local[2,3]"])
def test_a_local_master_gives_a_changefeed_at_most_the_hosts_cores(master: str) -> None:
    conf = server_spark_conf(master, {"spark.driver.memory": "1g"})
    assert conf == {
        "spark.scheduler.mode": "FAIR",
        DAEMON_KEY: WORKER_DAEMON,
        CHANGEFEED_TASKS_KEY: str(host_cores()),
        "spark.driver.memory": "1g",
    }


def test_a_cluster_master_keeps_its_parallelism_and_flags_win() -> None:
    assert server_spark_conf("spark://m:7077", {}) == {
        "spark.scheduler.mode": "FAIR",
        DAEMON_KEY: WORKER_DAEMON,
    }
    given = {"spark.scheduler.mode": "FIFO", CHANGEFEED_TASKS_KEY: "3", DAEMON_KEY: "pyspark.daemon"}
    assert server_spark_conf("local[8]", given) == given


def _last_line(code: str) -> str:
    """The last line ``code`` prints, run in a fresh interpreter (its own Spark session)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-4000:]
    lines = out.stdout.strip().splitlines()
    assert lines, out.stderr[-4000:]
    return lines[-1]


def test_the_worker_daemon_serves_tasks_with_sparkcdcs_modules_loaded() -> None:
    """A real local Spark with the daemon: a Python task runs, in a worker forked from it, with
    the writer's modules already in ``sys.modules`` before the task imports anything."""
    code = textwrap.dedent(
        f"""
        import sys
        from sparkcdc.pipeline.spark import get_spark

        spark = get_spark("local[1]", conf={{"{DAEMON_KEY}": "{WORKER_DAEMON}"}})
        try:
            def probe(_):
                import os, sys
                cmd = open(f"/proc/{{os.getppid()}}/cmdline", "rb").read().split(b"\\0")
                yield (b"{WORKER_DAEMON}" in cmd, "sparkcdc.sink.storage.writer" in sys.modules)

            print(spark.sparkContext.parallelize([1], 1).mapPartitions(probe).collect())
        finally:
            spark.stop()
        """
    )
    assert _last_line(code) == "[(True, True)]"


def test_a_servers_session_runs_the_writers_first_job_before_any_changefeed() -> None:
    """The session a server starts runs one writer-shaped Arrow task at once
    (``pipeline.spark.warm_up_writers``): the daemon is forked and the task done before any
    changefeed has a row to write (its first batch with rows paid 2.2 s for it on a quiet machine)."""
    code = textwrap.dedent(
        f"""
        import time
        import psutil
        from sparkcdc.server.runner import SparkChangefeedRunner

        def cmdline(p):
            try:
                return " ".join(p.cmdline())
            except psutil.Error:  # a worker that exited between the listing and this read
                return ""

        runner = SparkChangefeedRunner("local[1]", relay_max_bytes=0)
        spark = runner.spark()
        try:
            tracker = spark.sparkContext.statusTracker()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup()]
                done = [j for j in jobs if j is not None and j.status == "SUCCEEDED"]
                daemons = [
                    p for p in psutil.Process().children(recursive=True)
                    if "{WORKER_DAEMON}" in cmdline(p)
                ]
                if done and daemons:
                    break
                time.sleep(0.2)
            print(len(done), bool(daemons))  # the daemon and the workers it forked
        finally:
            runner.shutdown()
        """
    )
    assert _last_line(code) == "1 True"
