"""The Spark standalone harness: workers behave like separate hosts, and losing one is survivable.

The drivers run as subprocesses (this pytest process may already hold a local SparkContext) and print
one ``RESULT {json}`` line.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from sparkcdc.services.common import wait_until
from sparkcdc.services.spark_cluster import LocalSparkCluster

pytestmark = [pytest.mark.integration, pytest.mark.spark]

REPO = Path(__file__).resolve().parents[3]
# pytest's tmp_path is under /tmp, which the workers cannot see; this directory is shared by all.
SHARED_ROOT = REPO / ".pytest-shared"

# Helpers pasted in front of every driver: they run in the driver and (pickled by value) in the tasks.
COMMON = r'''
import json, os, sys, time
from pathlib import Path


def executor_info():
    """The executor this Python worker serves: found in the command line of its executor JVM ancestor."""
    import psutil

    p = psutil.Process()
    info = {"pid": os.getpid(), "mnt_ns": os.readlink("/proc/self/ns/mnt")}
    while p is not None:
        cmd = p.cmdline()
        if "--executor-id" in cmd:
            info["executor"] = cmd[cmd.index("--executor-id") + 1]
            info["worker_url"] = cmd[cmd.index("--worker-url") + 1] if "--worker-url" in cmd else None
            return info
        p = p.parent()
    info["executor"] = None
    return info


def start_spark(app_name):
    from sparkcdc.pipeline.spark import get_spark

    spark = get_spark(app_name=app_name, conf=json.loads(sys.argv[1]))  # master: SPARKCDC_SPARK_MASTER
    sc = spark.sparkContext
    deadline = time.monotonic() + 120
    # the driver counts itself: wait for it plus two executors, or a job may start on one executor only
    while sc._jsc.sc().getExecutorMemoryStatus().size() < 3:
        if time.monotonic() > deadline:
            raise TimeoutError("two executors did not register within 120 s")
        time.sleep(0.2)
    return spark


def report(result):
    print("RESULT " + json.dumps(result), flush=True)
'''

ISOLATION_DRIVER = r"""
import shutil

tag = sys.argv[2]
root = f"/tmp/sparkcdc-harness-{tag}"
os.makedirs(root, exist_ok=True)
driver_marker = os.path.join(root, "driver")
Path(driver_marker).write_text("driver")


def task(_rows):
    from pyspark import BarrierTaskContext

    ctx = BarrierTaskContext.get()
    p = ctx.partitionId()
    os.makedirs(root, exist_ok=True)
    mine, other = os.path.join(root, str(p)), os.path.join(root, str(1 - p))
    Path(mine).write_text(str(p))
    ctx.barrier()  # both tasks have written their file before either looks for the other's
    seen = {"sees_own": os.path.exists(mine), "sees_other": os.path.exists(other),
            "sees_driver": os.path.exists(driver_marker)}
    yield {"partition": p, **executor_info(), **seen}


def clean_up(_rows):
    shutil.rmtree(root, ignore_errors=True)
    yield os.path.exists(root)


spark = start_spark("harness-isolation")
# a barrier stage launches its tasks together: with one core per executor they land on two executors
tasks = spark.sparkContext.parallelize(range(2), 2).barrier().mapPartitions(task).collect()
result = {
    "tasks": tasks,
    "driver_sees_own": os.path.exists(driver_marker),
    "driver_sees_task_files": [os.path.exists(os.path.join(root, str(p))) for p in range(2)],
    "driver_mnt_ns": os.readlink("/proc/self/ns/mnt"),
}
shutil.rmtree(root, ignore_errors=True)
# the task files stay until the driver has looked for them; a second barrier stage (again one task
# per executor) removes them
result["task_files_left"] = spark.sparkContext.parallelize(range(2), 2).barrier().mapPartitions(clean_up).collect()
spark.stop()
report(result)
"""

EXECUTOR_LOSS_DRIVER = r"""
shared = sys.argv[2]


def task(index, _rows):
    from pyspark import TaskContext

    attempt = TaskContext.get().attemptNumber()
    info = executor_info()
    Path(shared, f"started-{index}-{attempt}.json").write_text(json.dumps(info))
    time.sleep(2)  # long enough for the test to kill a worker while tasks run
    yield {"index": index, "attempt": attempt, "executor": info["executor"]}


spark = start_spark("harness-executor-loss")
results = spark.sparkContext.parallelize(range(8), 8).mapPartitionsWithIndex(task).collect()
spark.stop()
report({"results": results})
"""


def _driver_command(
    tmp_path: Path, name: str, body: str, cluster: LocalSparkCluster, *args: str
) -> list[str]:
    script = tmp_path / f"{name}.py"
    script.write_text(COMMON + body)
    return [sys.executable, str(script), json.dumps(cluster.spark_conf()), *args]


def _result(out: Path, err: Path, returncode: int | None) -> dict[str, Any]:
    lines = [ln for ln in out.read_text().splitlines() if ln.startswith("RESULT ")]
    assert returncode == 0 and lines, (
        f"driver failed (exit {returncode}):\n{out.read_text()[-3000:]}\n{err.read_text()[-5000:]}"
    )
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    return result


def _kill_tree(pid: int) -> None:
    """SIGKILL a driver and its JVM."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass  # exited meanwhile
    psutil.wait_procs(procs, timeout=30)


def _require_isolation(cluster: LocalSparkCluster) -> None:
    if not cluster.isolated:
        pytest.fail(
            "the Spark workers are not isolated (unshare --mount / mount tmpfs not permitted: run as root); "
            "this test needs workers that behave like separate hosts"
        )


@pytest.fixture()
def shared_dir() -> Iterator[Path]:
    """A directory outside /tmp that the test, the driver and every worker see."""
    path = SHARED_ROOT / uuid.uuid4().hex
    path.mkdir(parents=True)
    yield path
    shutil.rmtree(path, ignore_errors=True)
    try:
        SHARED_ROOT.rmdir()
    except OSError:
        pass  # another test still uses it


def test_workers_do_not_share_tmp_with_each_other_or_the_driver(
    spark_cluster: LocalSparkCluster, tmp_path: Path
) -> None:
    _require_isolation(spark_cluster)
    assert len(spark_cluster.alive_workers()) == 2
    tag = uuid.uuid4().hex
    out, err = tmp_path / "driver.out", tmp_path / "driver.err"
    cmd = _driver_command(tmp_path, "isolation", ISOLATION_DRIVER, spark_cluster, tag)
    with open(out, "w") as o, open(err, "w") as e:
        driver = subprocess.Popen(cmd, env=spark_cluster.driver_env(), cwd=tmp_path, stdout=o, stderr=e)
    try:
        driver.wait(timeout=300)
    finally:
        if driver.poll() is None:
            _kill_tree(driver.pid)
            driver.wait(timeout=30)
    result = _result(out, err, driver.returncode)

    tasks = sorted(result["tasks"], key=lambda t: t["partition"])
    assert [t["partition"] for t in tasks] == [0, 1]
    # two executors on two different workers, each in a mount namespace of its own
    assert None not in [t["executor"] for t in tasks]
    assert tasks[0]["executor"] != tasks[1]["executor"]
    assert tasks[0]["worker_url"] != tasks[1]["worker_url"]
    own_ns = os.readlink("/proc/self/ns/mnt")
    namespaces = {tasks[0]["mnt_ns"], tasks[1]["mnt_ns"]}
    assert len(namespaces) == 2 and own_ns not in namespaces and result["driver_mnt_ns"] not in namespaces
    # the checks work (everyone sees their own file) ...
    assert all(t["sees_own"] for t in tasks) and result["driver_sees_own"]
    # ... and nobody sees anyone else's /tmp
    assert [t["sees_other"] for t in tasks] == [False, False]
    assert [t["sees_driver"] for t in tasks] == [False, False]
    assert result["driver_sees_task_files"] == [False, False]
    assert not Path(f"/tmp/sparkcdc-harness-{tag}").exists()
    assert result["task_files_left"] == [False, False]


def test_job_survives_killing_a_worker_and_the_worker_comes_back(
    spark_cluster: LocalSparkCluster, tmp_path: Path, shared_dir: Path
) -> None:
    _require_isolation(spark_cluster)
    assert len(spark_cluster.alive_workers()) == 2
    out, err = tmp_path / "driver.out", tmp_path / "driver.err"
    cmd = _driver_command(tmp_path, "executor_loss", EXECUTOR_LOSS_DRIVER, spark_cluster, str(shared_dir))
    killed = False
    with open(out, "w") as o, open(err, "w") as e:
        driver = subprocess.Popen(cmd, env=spark_cluster.driver_env(), cwd=tmp_path, stdout=o, stderr=e)
    try:

        def task_running_on_worker_0() -> dict[str, Any] | None:
            if driver.poll() is not None:
                raise AssertionError(
                    f"the driver ended before a task ran on worker 0: {err.read_text()[-3000:]}"
                )
            pids = {p.pid for p in spark_cluster.worker_processes(0)}
            for marker in shared_dir.glob("started-*.json"):
                try:
                    info: dict[str, Any] = json.loads(marker.read_text())
                except ValueError:
                    continue  # being written
                if info["pid"] in pids:
                    index, attempt = marker.stem.split("-")[1:]
                    return {**info, "index": int(index), "attempt": int(attempt)}
            return None

        victim = wait_until(
            task_running_on_worker_0, timeout=180, what="a task running on worker 0", interval=0.1
        )
        spark_cluster.kill_worker(0)
        killed = True
        assert spark_cluster.worker_processes(0) == []
        assert len(spark_cluster.alive_workers()) == 1

        driver.wait(timeout=300)
        result = _result(out, err, driver.returncode)
        results = result["results"]
        assert Counter(r["index"] for r in results) == Counter(range(8))
        # the task that died with worker 0 was run again, on the executor of the surviving worker
        rerun = next(r for r in results if r["index"] == victim["index"])
        assert rerun["attempt"] > victim["attempt"]
        assert rerun["executor"] != victim["executor"]

        spark_cluster.restart_worker(0)
        killed = False
        assert len(spark_cluster.alive_workers()) == 2
        assert spark_cluster.worker_processes(0)
    finally:
        if driver.poll() is None:
            _kill_tree(driver.pid)
            driver.wait(timeout=30)
        if killed:
            spark_cluster.restart_worker(0)  # later tests get two workers again
