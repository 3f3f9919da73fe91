"""e2e on a Spark standalone cluster of two one-core workers that behave like separate hosts.

Each worker runs in its own mount namespace with a private /tmp (``spark_cluster`` fixture):
nothing an executor writes to its local disk is visible to the driver or the other worker, so
every piece of state the executors share goes through the data dir (moto S3 here) or the sink.
The driver is a ``sparkcdc run`` (or ``sparkcdc server``) subprocess on the same host.

Each scenario kills one worker with SIGKILL (its JVM, its executor JVM and its Python workers,
as when a host dies) while one of its tasks runs, lets Spark reschedule on the other worker,
starts the killed worker again, and then checks the downstream: ``sparkcdc consumer`` replays
the output into a second MariaDB, which must equal the upstream row for row.
"""

from __future__ import annotations

import csv
import io
import re
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.pipeline.state import StateDir
from sparkcdc.services.common import wait_until
from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.postgres import LocalPostgres
from sparkcdc.services.s3 import LocalS3
from sparkcdc.services.spark_cluster import LocalSparkCluster
from sparkcdc.services.tansu import LocalTansu

from .test_snapshot_e2e import BigLoad, _create_big, _create_downstream_tables
from .workload import (
    CliProcess,
    SteadyLoad,
    Workload,
    assert_tables_equal,
    create_tables,
    replay_once,
    run_args,
    tso,
    wait_for,
)

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

BURST_ROWS = 150_000


@pytest.fixture()
def cluster(spark_cluster: LocalSparkCluster) -> Iterator[LocalSparkCluster]:
    """The session's cluster, with both workers alive before and after the test."""
    if not spark_cluster.isolated:
        pytest.fail("the cluster tests need workers with a private /tmp (unshare --mount, as root)")
    for i in range(spark_cluster.workers):
        if not _alive(spark_cluster, i):
            spark_cluster.restart_worker(i)
    yield spark_cluster
    for i in range(spark_cluster.workers):
        if not _alive(spark_cluster, i):
            spark_cluster.restart_worker(i)


@pytest.fixture(scope="module")
def buckets(local_s3: LocalS3) -> LocalS3:
    """The buckets of the data dirs and the storage sink."""
    for name in ("cluster-state", "cluster-sink"):
        local_s3.create_bucket(name)
    return local_s3


@pytest.fixture(scope="module")
def pg() -> Iterator[LocalPostgres]:
    with LocalPostgres() as server:
        yield server


def _alive(cluster: LocalSparkCluster, i: int) -> bool:
    return bool(cluster.worker_processes(i)) and len(cluster.alive_workers()) == cluster.workers


def busy_worker(cluster: LocalSparkCluster, timeout: float = 120) -> int:
    """The first worker whose Python workers are using CPU: a task of ours runs there now.

    Busy means a quarter of a core over the time between two looks, counted per process (a Python
    worker that started meanwhile counts from its start): on a loaded machine a task gets less
    than a core, and the looks come further apart than asked.
    """
    seen: dict[int, float] = {}  # pid -> CPU seconds at the last look
    last_look = [time.monotonic()]

    def used(i: int) -> float:
        total = 0.0
        for p in cluster.worker_processes(i):
            try:
                if "python" in p.name():
                    t = p.cpu_times()
                    now = t.user + t.system
                    total += now - seen.get(p.pid, 0.0)
                    seen[p.pid] = now
            except Exception:  # the process ended between the listing and the read
                continue
        return total

    for i in range(cluster.workers):
        used(i)

    def probe() -> int | None:
        wall = time.monotonic() - last_look[0]
        last_look[0] += wall
        busy = [i for i in range(cluster.workers) if used(i) > 0.25 * wall]
        return busy[0] + 1 if busy else None

    return int(wait_until(probe, timeout=timeout, what="a task running on a worker", interval=0.3)) - 1


def _checkpoint(state: StateDir) -> dict[str, Any]:
    return state.read_json("checkpoint.json") or {}


def _config(tmp_path: Path, schema: str, extra: str = "") -> Path:
    config = tmp_path / "cf.toml"
    config.write_text(f'[filter]\nrules = ["{schema}.*"]\n[sink.csv]\ninclude-commit-ts = true\n{extra}')
    return config


def _run_args(
    cluster: LocalSparkCluster, upstream: str, sink_uri: str, config: Path, cid: str, data_dir: str
) -> list[str]:
    return run_args(upstream, sink_uri, cid, data_dir, config=config, master=cluster.master_url)


def _stop(run: CliProcess, delivered: Callable[[int], bool] | None, target: int) -> None:
    """SIGTERM the driver alone, as a service manager does: it stops its query and closes the sink, which
    publishes its last checkpoint; ``delivered(target)`` then checks the sink shows it."""
    assert run.proc.poll() is None, run.output()[-4000:]
    run.proc.send_signal(signal.SIGTERM)
    assert run.proc.wait(timeout=120) == 128 + signal.SIGTERM, run.output()[-4000:]
    if delivered is not None:
        assert delivered(target), "the sink does not show the end of the load"


def _sink_metadata_at(folder: StateDir) -> Callable[[int], bool]:
    """Whether a storage sink's ``metadata`` checkpoint reached a ts."""
    return lambda ts: int((folder.read_json("metadata") or {}).get("checkpoint-ts", 0)) >= ts


def _stream_through_a_worker_loss(
    cluster: LocalSparkCluster,
    mariadb: LocalMariaDB,
    local_s3: LocalS3,
    tmp_path: Path,
    schema: str,
    cid: str,
    sink_uri: str,
    delivered: Callable[[int], bool] | None = None,
) -> tuple[StateDir, Path]:
    """Run a changefeed on the cluster, kill the worker running a task of a large batch, finish the load.

    Returns the changefeed's state folder and its config once the checkpoint passed the end of the load
    and the changefeed was stopped with Ctrl-C; ``delivered(ts)`` then checks the sink shows it (the
    storage sink's ``metadata`` file).
    """
    start_ts = tso(mariadb.uri)
    create_tables(mariadb, schema)
    mariadb.execute(f"CREATE TABLE `{schema}`.big (id INT PRIMARY KEY, v INT, pad VARCHAR(40))")
    Workload(mariadb, schema, rows=40).phase_inserts()
    data_dir = local_s3.sink_uri(f"cluster-state/{cid}")
    state = StateDir.parse(data_dir).child(cid)
    config = _config(tmp_path, schema)
    run = CliProcess(
        [*_run_args(cluster, mariadb.uri, sink_uri, config, cid, data_dir), "--start-ts", str(start_ts)],
        tmp_path / "run.log",
        env=cluster.driver_env(),
    )
    load = SteadyLoad(mariadb, schema, pause=0.05)

    def why() -> str:
        alive = cluster.alive_workers()
        return f"\ncheckpoint: {_checkpoint(state)}\nalive workers: {alive}\ndriver output:\n{run.output()[-8000:]}"

    try:
        run.wait_for("started; data dir", timeout=240, what="the changefeed to start on the cluster")
        wait_for(lambda: _checkpoint(state).get("rows_total", 0) > 0, 240, "a first batch on the cluster")
        load.start()
        # A batch large enough that its tasks run for seconds: the kill lands inside one. The rows
        # are counted before the burst is written: read after it, the count could already hold the
        # burst. When the burst's batch was committed before a busy worker was found (a loaded
        # machine), the kill would not land inside it: another burst is written instead.
        before = _checkpoint(state).get("rows_total", 0)
        bursts = 0
        while True:
            assert bursts < 3, f"{bursts} bursts were each committed before a busy worker was found"
            mariadb.execute(
                f"INSERT INTO `{schema}`.big SELECT seq + {bursts * BURST_ROWS}, seq, REPEAT('x', 30) "
                f"FROM `{schema}`.seq_1_to_{BURST_ROWS}"
            )
            bursts += 1
            victim = busy_worker(cluster)
            if _checkpoint(state).get("rows_total", 0) < before + bursts * BURST_ROWS:
                break
        cluster.kill_worker(victim)
        assert len(cluster.alive_workers()) == cluster.workers - 1
        # The batch is rescheduled on the worker that is left, and the stream goes on past it.
        wait_for(
            lambda: _checkpoint(state).get("rows_total", 0) >= before + bursts * BURST_ROWS,
            300,
            "the burst to be written after the worker loss",
            on_timeout=why,
        )
        cluster.restart_worker(victim)
        seen = load.transactions
        wait_for(lambda: load.transactions > seen + 30, 60, "more load after the worker came back")
        load.stop()
        target = tso(mariadb.uri)
        wait_for(
            lambda: _checkpoint(state).get("checkpoint_ts", 0) >= target, 300, "the end of the load", why
        )
        _stop(run, delivered, target)
    finally:
        if load.is_alive():
            load.stop()
        run.stop()
    return state, config


def test_storage_changefeed_loses_a_worker_mid_stream(
    cluster: LocalSparkCluster,
    mariadb: LocalMariaDB,
    downstream: LocalMariaDB,
    buckets: LocalS3,
    tmp_path: Path,
) -> None:
    local_s3 = buckets
    schema = "e2e_cluster_storage"
    sink_uri = local_s3.sink_uri("cluster-sink/storage", protocol="csv")
    out = StateDir.parse(local_s3.sink_uri("cluster-sink/storage"))  # the sink's folder, read as objects
    _, config = _stream_through_a_worker_loss(
        cluster, mariadb, local_s3, tmp_path, schema, "cluster-storage", sink_uri, _sink_metadata_at(out)
    )
    files = out.backend.walk_files()
    assert not [f for f in files if ".sparkcdc-staging" in f], "staging left behind"
    data = sorted(f for f in files if re.search(r"/CDC\d+\.csv$", f))
    # Every table folder is numbered 1..n without a gap (nothing orphaned) and no record twice.
    by_dir: dict[str, list[int]] = {}
    for f in data:
        d, name = f.rsplit("/", 1)
        by_dir.setdefault(d, []).append(int(name[3:-4]))
    assert all(sorted(n) == list(range(1, len(n) + 1)) for n in by_dir.values()), by_dir
    records: Counter[tuple[str, ...]] = Counter()
    for f in data:
        records.update(tuple(r) for r in csv.reader(io.StringIO((out.read_bytes(f) or b"").decode())))
    dup = [r for r, n in records.items() if n > 1]
    assert sum(records.values()) > BURST_ROWS and not dup, dup[:3]
    replay_once(sink_uri, downstream.port, "progress_cluster_storage", config, timeout=600)
    assert_tables_equal(mariadb, downstream, schema)
    downstream.execute(
        f"DROP DATABASE IF EXISTS `{schema}`", "DROP DATABASE IF EXISTS progress_cluster_storage"
    )


def test_kafka_changefeed_loses_a_worker_mid_stream(
    cluster: LocalSparkCluster,
    mariadb: LocalMariaDB,
    downstream: LocalMariaDB,
    buckets: LocalS3,
    tansu: LocalTansu,
    tmp_path: Path,
) -> None:
    local_s3 = buckets
    schema = "e2e_cluster_kafka"
    query = "protocol=canal-json&enable-tidb-extension=true&partition-num=3"
    _stream_through_a_worker_loss(
        cluster, mariadb, local_s3, tmp_path, schema, "cluster-kafka", tansu.sink_uri("cluster-canal", query)
    )
    # Messages a killed task produced before it died are sent again by its retry; the consumer drops
    # the copies by commit_ts, so the replica is exact.
    replay_once(
        tansu.sink_uri("cluster-canal", "protocol=canal-json"), downstream.port, "progress_cluster_kafka"
    )
    assert_tables_equal(mariadb, downstream, schema)
    downstream.execute(
        f"DROP DATABASE IF EXISTS `{schema}`", "DROP DATABASE IF EXISTS progress_cluster_kafka"
    )


SNAPSHOT_ROWS = 500_000


def test_snapshot_of_500k_rows_loses_a_worker_mid_read(
    cluster: LocalSparkCluster,
    mariadb: LocalMariaDB,
    downstream: LocalMariaDB,
    buckets: LocalS3,
    tmp_path: Path,
) -> None:
    schema = "e2e_cluster_snap"
    mariadb.execute(f"DROP DATABASE IF EXISTS `{schema}`", f"CREATE DATABASE `{schema}`")
    _create_big(mariadb, schema, SNAPSHOT_ROWS)
    data_dir = buckets.sink_uri("cluster-state/snapshot")
    state = StateDir.parse(data_dir).child("cluster-snap")
    sink_uri = buckets.sink_uri("cluster-sink/snapshot", protocol="csv")
    # Row by row (not upstream-rendered): every chunk is a parquet file in the data dir's spool that
    # another task, maybe on the other host, reads back when the snapshot batch is written.
    config = _config(
        tmp_path, schema, '[snapshot]\nmode = "initial"\nchunk-size = 2000\nupstream-render = false\n'
    )
    writes = BigLoad(mariadb, schema, SNAPSHOT_ROWS)
    run = CliProcess(
        _run_args(cluster, mariadb.uri, sink_uri, config, "cluster-snap", data_dir),
        tmp_path / "run.log",
        env=cluster.driver_env(),
    )
    snap = state.child("snapshot")

    try:
        writes.start()
        # The first spooled chunk (one LIST, cheap to poll): both workers read ranges now (two tasks,
        # one per one-core worker), so kill one at once.
        wait_for(lambda: snap.child("rows").list(), 300, "the snapshot to spool its first chunk")
        victim = 0
        cluster.kill_worker(victim)
        assert not snap.exists("done.json"), "the snapshot ended before the worker was killed"
        wait_for(lambda: snap.exists("done.json"), 600, "the snapshot to finish on the remaining worker")
        cluster.restart_worker(victim)
        ops = writes.stop()
        target = tso(mariadb.uri)
        wait_for(
            lambda: _checkpoint(state).get("checkpoint_ts", 0) >= target, 300, "the stream after the snapshot"
        )
        _stop(run, _sink_metadata_at(StateDir.parse(buckets.sink_uri("cluster-sink/snapshot"))), target)
        report = snap.read_json("done.json")
        ranges = [
            snap.child("ranges").read_json(n) for n in snap.child("ranges").list() if n.endswith(".json")
        ]
    finally:
        if writes.is_alive():
            writes.stop()
        run.stop()
    assert report["rows_copied"] >= SNAPSHOT_ROWS - ops["delete"] and report["touched_keys"] > 0
    assert ops["update"] > 20 and ops["move"] > 5
    # The worker was lost while both range tasks ran (the snapshot was not done); the lost task ran again
    # on the other worker, which skipped the ranges already done and resumed the others from their saved
    # progress (tests/integration/snapshot checks the resume itself), and every range ended done.
    assert "Lost executor" in run.output(), run.output()[-3000:]
    assert all(r["stage"] == "done" for r in ranges) and len(ranges) == report["ranges"]
    print(f"ranges read twice after the loss: {sum(r['attempts'] >= 2 for r in ranges)} of {len(ranges)}")
    assert not snap.child("rows").list(), "the spool was not removed"
    files = StateDir.parse(buckets.sink_uri("cluster-sink/snapshot")).backend.walk_files()
    assert not [f for f in files if ".sparkcdc-staging" in f], "staging left behind"
    _create_downstream_tables(mariadb, downstream, schema)
    replay_once(sink_uri, downstream.port, "progress_cluster_snap", config, timeout=900)
    assert_tables_equal(mariadb, downstream, schema)
    downstream.execute(f"DROP DATABASE IF EXISTS `{schema}`", "DROP DATABASE IF EXISTS progress_cluster_snap")
    mariadb.execute(f"DROP DATABASE IF EXISTS `{schema}`")


LEASE = 4


def test_two_servers_fail_over_a_changefeed_running_on_the_cluster(
    cluster: LocalSparkCluster,
    mariadb: LocalMariaDB,
    downstream: LocalMariaDB,
    buckets: LocalS3,
    pg: LocalPostgres,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import json
    import urllib.request

    from tests.e2e.failover import fail_over_under_load
    from tests.integration.server.conftest import ServerProc

    schema = "e2e_cluster_failover"
    for k, v in cluster.driver_env().items():
        if k.startswith(("SPARK", "PYSPARK")):
            monkeypatch.setenv(k, v)
    meta = pg.create_database("cluster_failover_meta")
    extra = (
        "--spark-master",
        cluster.master_url,
        "--data-dir",
        buckets.sink_uri("cluster-state/servers"),
    )
    mariadb.execute(f"DROP DATABASE IF EXISTS {schema}")
    servers = {n: ServerProc(meta, tmp_path, lease=LEASE, name=n, extra=extra).start() for n in ("a", "b")}

    def apps() -> list[str]:
        with urllib.request.urlopen(cluster.web_url + "/json/", timeout=5) as r:
            return [a["name"] for a in json.load(r)["activeapps"]]

    try:
        # A server's first changefeed also starts its Spark application and executors on the cluster.
        f = fail_over_under_load(
            servers,
            "cluster-failover",
            mariadb,
            downstream,
            schema,
            LEASE,
            first_sync_timeout=300,
            takeover_leases=15,
        )
        # Both changefeed runs were Spark applications of the servers on the cluster; the killed
        # server's is gone, and the survivor's holds the workers now.
        wait_until(
            lambda: apps() == [f"sparkcdc-server-{f.ids[f.survivor][:8]}"],
            timeout=60,
            what="only the survivor's app",
        )
    finally:
        for s in servers.values():
            s.stop()
        mariadb.execute(f"DROP DATABASE IF EXISTS {schema}")


def test_a_folder_on_the_drivers_own_disk_is_refused_on_a_cluster(
    cluster: LocalSparkCluster, mariadb: LocalMariaDB, buckets: LocalS3, tmp_path: Path
) -> None:
    """tmp_path is under the driver's /tmp, which no worker sees: as a sink or a snapshot's data dir, refused."""
    schema = "e2e_cluster_local_dirs"
    mariadb.execute(f"DROP DATABASE IF EXISTS `{schema}`", f"CREATE DATABASE `{schema}`")
    _create_big(mariadb, schema, 1000)
    config = _config(tmp_path, schema, '[snapshot]\nmode = "initial"\n')
    cases = [
        (f"file://{tmp_path / 'sink'}?protocol=csv", buckets.sink_uri("cluster-state/local-sink"), "sink"),
        (buckets.sink_uri("cluster-sink/local-state", protocol="csv"), str(tmp_path / "state"), "snapshot"),
    ]
    try:
        for sink_uri, data_dir, what in cases:
            run = CliProcess(
                _run_args(cluster, mariadb.uri, sink_uri, config, f"local-{what}", data_dir),
                tmp_path / f"{what}.log",
                env=cluster.driver_env(),
            )
            try:
                rc = run.wait(timeout=240)
            finally:
                run.stop()
            out = run.output()
            assert rc != 0, out[-3000:]
            errors = [line for line in out.splitlines() if line.startswith("Error: [CDC:")]
            assert len(errors) == 1 and "the Spark executors cannot see" in errors[0], out[-3000:]
            assert what in errors[0] and "every host mounts" in errors[0] and "sparkcdc-secret" not in out
    finally:
        mariadb.execute(f"DROP DATABASE IF EXISTS `{schema}`")
