"""e2e: `sparkcdc run --data-dir s3://…` keeps every piece of a changefeed's state in S3.

A changefeed with an initial snapshot and a live load keeps its start point, checkpoint,
schema history and snapshot progress in a bucket of a real S3 server (moto), not on the
driver's disk. It is killed with SIGKILL while the load runs, and Spark's driver-local
checkpoint is deleted, as when the driver comes back on another host: the restart resumes
from the checkpoint in S3 and the replayed output equals the upstream. Then the changefeed
runs on the first host again, whose Spark log is older than the checkpoint in S3: it starts
from the checkpoint, not from that log.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.capture.offset import file_seq
from sparkcdc.pipeline.state import StateDir
from sparkcdc.pipeline.writer import read_batch_offset
from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.s3 import LocalS3

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

SCHEMA = "e2e_s3state"
CHANGEFEED = "e2e-s3-state"


def _checkpoint(state: StateDir) -> dict[str, Any]:
    return state.read_json("checkpoint.json") or {}


def test_state_in_s3_survives_a_kill_and_a_lost_spark_checkpoint(
    mariadb: LocalMariaDB, downstream: LocalMariaDB, local_s3: LocalS3, tmp_path: Path
) -> None:
    local_s3.create_bucket("e2e-state")
    create_tables(mariadb, SCHEMA)
    Workload(mariadb, SCHEMA, rows=60).phase_inserts()
    data_dir = local_s3.sink_uri("e2e-state/feeds")
    state = StateDir.parse(data_dir).child(CHANGEFEED)
    sink = tmp_path / "sink"
    sink_uri = f"file://{sink}?protocol=csv"
    config = tmp_path / "cf.toml"
    config.write_text(
        f'[filter]\nrules = ["{SCHEMA}.*"]\n[sink.csv]\ninclude-commit-ts = true\n'
        '[snapshot]\nmode = "initial"\nchunk-size = 20\n'
    )
    spark_root = tmp_path / "spark-checkpoints"
    common = run_args(
        mariadb.uri,
        sink_uri,
        CHANGEFEED,
        data_dir,
        "--spark-conf",
        f"spark.sql.streaming.checkpointLocation={spark_root}",
        config=config,
    )
    run1 = CliProcess(common, tmp_path / "run1.log")
    load = SteadyLoad(mariadb, SCHEMA, pause=0.05)
    try:
        run1.wait_for("started; data dir s3://e2e-state/feeds/", timeout=240, what="the first run to start")
        assert "sparkcdc-secret" not in run1.output()
        load.start()
        first = wait_for(
            lambda: _checkpoint(state).get("rows_total", 0) > 0 and _checkpoint(state), 240, "a batch"
        )
        wait_for(
            lambda: _checkpoint(state)["rows_total"] > first["rows_total"] + 30 and load.transactions > 60,
            240,
            "the live load to be replicated",
        )
        run1.kill9()
    finally:
        run1.stop()
    # Everything the changefeed keeps is in the bucket; the driver's disk has Spark's checkpoint only.
    names = set(state.list())
    assert {"start.json", "checkpoint.json", "schema_history.jsonl", "snapshot"} <= names, names
    assert state.child("snapshot").read_json("done.json")["rows_written"] > 0
    assert not (tmp_path / "s3:").exists() and not Path("s3:").exists()
    spark_dirs = list(spark_root.iterdir())
    assert len(spark_dirs) == 1 and (spark_dirs[0] / "offsets").is_dir()
    host_a = tmp_path / "host-a-spark-checkpoints"
    shutil.copytree(spark_root, host_a)
    shutil.rmtree(spark_root)  # the driver comes back on another host

    total = load.stop()
    target_ts = tso(mariadb.uri)
    run2 = CliProcess([*common, "--target-ts", str(target_ts)], tmp_path / "run2.log")
    try:
        rc = run2.wait(timeout=420)
    finally:
        run2.stop()
    out2 = run2.output()
    assert rc == 0, f"restart exited with {rc}:\n{out2[-4000:]}"
    assert f"reached target-ts {target_ts}" in out2
    assert _checkpoint(state)["checkpoint_ts"] >= target_ts
    assert json.loads((sink / "metadata").read_bytes())["checkpoint-ts"] >= target_ts
    after_b = _checkpoint(state)

    # Back on the first host, whose driver-local Spark log stops where run1 was killed: the start
    # follows checkpoint.json (newer), and the old log is moved aside instead of replayed.
    shutil.rmtree(spark_root)
    shutil.copytree(host_a, spark_root)
    mariadb.execute(
        *(
            f"INSERT INTO {SCHEMA}.accounts (owner, balance) VALUES ('back on host a', {k}.25)"
            for k in range(10)
        )
    )
    target3 = tso(mariadb.uri)
    run3 = CliProcess([*common, "--target-ts", str(target3)], tmp_path / "run3.log")
    try:
        rc = run3.wait(timeout=420)
    finally:
        run3.stop()
    out3 = run3.output()
    assert rc == 0, f"the run back on the first host exited with {rc}:\n{out3[-4000:]}"
    assert "starting from checkpoint.json; moved the older Spark checkpoint" in out3, out3[-4000:]
    (log_dir,) = [d for d in spark_root.iterdir() if ".stale-" not in d.name]
    first_end = read_batch_offset(str(log_dir), 0)
    b_end = after_b["end"]
    assert (file_seq(first_end["file"]), first_end["pos"]) >= (file_seq(b_end["file"]), b_end["pos"]), (
        f"the run replayed from {first_end}, before where the other host stopped ({b_end})"
    )
    assert json.loads((sink / "metadata").read_bytes())["checkpoint-ts"] >= target3

    # The tables existed before the changefeed: created empty downstream, as with mariadb-dump --no-data.
    create_tables(downstream, SCHEMA)
    replay_once(sink_uri, downstream.port, "progress_s3state", config)
    assert_tables_equal(mariadb, downstream, SCHEMA)
    assert total > 60
    downstream.execute(f"DROP DATABASE IF EXISTS `{SCHEMA}`", "DROP DATABASE IF EXISTS progress_s3state")
