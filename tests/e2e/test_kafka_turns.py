"""e2e: a Kafka changefeed whose batches are split into segments, encoded by parallel Spark tasks
that take turns at producing (``pipeline.turns``).

With a small split size every DML batch of the mixed workload is cut into several segments, and
index-value dispatch spreads every table over three partitions, so each partition receives
messages of several segments of a batch. Each partition must hold its messages in commit order,
and the topic, replayed by the Kafka consumer into a downstream MariaDB, must equal the upstream.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest

from sparkcdc.pipeline import plan
from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.tansu import LocalTansu
from tests.integration.kafka.conftest import consume_all

from .test_storage_segments import _run, _segments_per_batch
from .workload import (
    CliProcess,
    assert_tables_equal,
    replay_once,
    run_args,
    run_workload,
    tso,
    wait_for,
)

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

SCHEMA = "e2e_kafka_turns"
RUN_TIMEOUT = 420


def _changefeed(tansu: LocalTansu, schema: str, tmp_path: Path) -> tuple[Path, str, str]:
    """The changefeed's config (its schema, index-value dispatch), a new topic and its sink URI
    (canal-json with commit_ts, three partitions)."""
    config = tmp_path / "cf.toml"
    config.write_text(
        f'[filter]\nrules = ["{schema}.*"]\n'
        f'[sink]\ndispatchers = [{{matcher = ["{schema}.*"], partition = "index-value"}}]\n'
    )
    topic = f"turns-{uuid.uuid4().hex[:8]}"
    sink_uri = tansu.sink_uri(topic, "protocol=canal-json&enable-tidb-extension=true&partition-num=3")
    return config, topic, sink_uri


def test_parallel_segments_reach_every_partition_in_commit_order(
    spark: Any,
    mariadb: LocalMariaDB,
    downstream: LocalMariaDB,
    tansu: LocalTansu,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(plan, "SPLIT_BYTES", 8192)  # several segments from 400 rows
    start_ts = tso(mariadb.uri)
    run_workload(mariadb, SCHEMA, rows=400, seed=23)
    target_ts = tso(mariadb.uri)
    config, topic, sink_uri = _changefeed(tansu, SCHEMA, tmp_path)
    state = tmp_path / "state"
    _run(spark, mariadb.uri, sink_uri, config, state, start_ts, target_ts)
    segments = _segments_per_batch(state)
    assert max(segments) >= 2, f"no batch was split into segments: {segments}"

    rows = 0
    for partition, messages in consume_all(tansu.bootstrap, topic, 3).items():
        last = 0
        for m in messages:
            body = json.loads(m.value())
            if body.get("type") in ("INSERT", "UPDATE", "DELETE"):
                ts = int(body["_tidb"]["commitTs"])
                assert ts >= last, f"partition {partition}: commitTs {ts} after {last}"
                last = ts
                rows += 1
    assert rows >= 400

    downstream.execute(f"DROP DATABASE IF EXISTS `{SCHEMA}`", "DROP DATABASE IF EXISTS `progress_turns`")
    replay_once(tansu.sink_uri(topic, "protocol=canal-json"), downstream.port, "progress_turns", config)
    assert_tables_equal(mariadb, downstream, SCHEMA)
    downstream.execute(f"DROP DATABASE IF EXISTS `{SCHEMA}`", "DROP DATABASE IF EXISTS `progress_turns`")


def _turn_takers(driver_pid: int) -> list[psutil.Process]:
    """The Spark Python workers of ``sparkcdc run`` that are connected to its driver's turn desk:
    the tasks of a batch's segments, while they run."""
    try:
        driver = psutil.Process(driver_pid)
        listening = {c.laddr.port for c in driver.net_connections("tcp") if c.status == psutil.CONN_LISTEN}
        procs = driver.children(recursive=True)
    except psutil.Error:
        return []
    out = []
    for p in procs:
        try:
            if "pyspark.daemon" in p.cmdline() and any(
                c.raddr and c.raddr.port in listening for c in p.net_connections("tcp")
            ):
                out.append(p)
        except psutil.Error:
            continue
    return out


def test_a_segment_task_killed_mid_batch_gives_the_batch_up_and_the_rerun_loses_and_reorders_nothing(
    mariadb: LocalMariaDB, downstream: LocalMariaDB, tansu: LocalTansu, tmp_path: Path
) -> None:
    """kill -9 of a segment's Spark Python worker while its batch runs (``sparkcdc run``, local[2]):
    the other segment is turned away, the run restarts the query, the batch is written again from
    its first segment, and the topic replays to a replica equal to the upstream. The batch is
    inserts, then updates and deletes of the same keys, in two segments: a segment sent ahead of
    the one before it would apply an update before its insert."""
    schema = "e2e_kafka_turns_kill"
    mariadb.execute(f"DROP DATABASE IF EXISTS `{schema}`")
    start_ts = tso(mariadb.uri)  # the table's creation is in the stream: the consumer creates it
    mariadb.execute(
        f"CREATE DATABASE `{schema}`",
        f"CREATE TABLE `{schema}`.t (id INT PRIMARY KEY, v INT, pad VARCHAR(40))",
    )
    rows = 120_000
    mariadb.execute(
        f"INSERT INTO `{schema}`.t SELECT seq, seq, REPEAT('x', 30) FROM `{schema}`.seq_1_to_{rows} WHERE seq % 2 = 1",
        f"INSERT INTO `{schema}`.t SELECT seq, seq, REPEAT('y', 30) FROM `{schema}`.seq_1_to_{rows} WHERE seq % 2 = 0",
        f"UPDATE `{schema}`.t SET v = v + 1, pad = REPEAT('z', 30)",
        f"DELETE FROM `{schema}`.t WHERE id % 3 = 0",
    )
    target_ts = tso(mariadb.uri)
    config, topic, sink_uri = _changefeed(tansu, schema, tmp_path)
    run = CliProcess(
        run_args(
            mariadb.uri,
            sink_uri,
            "turns-kill",
            tmp_path / "state",
            "--start-ts",
            str(start_ts),
            "--target-ts",
            str(target_ts),
            config=config,
        ),
        tmp_path / "run.log",
    )
    try:
        victims = wait_for(
            lambda: _turn_takers(run.pid), 240, "a segment task of the batch", lambda: run.output()[-4000:]
        )
        victims[0].kill()
        rc = run.wait(RUN_TIMEOUT)
        out = run.output()
        assert rc == 0, f"sparkcdc run exited with {rc}:\n{out[-4000:]}"
        assert f"reached target-ts {target_ts}" in out
        assert "retrying in" in out, f"the killed task did not restart the query:\n{out[-4000:]}"
    finally:
        run.stop()
    state = tmp_path / "state" / "turns-kill"
    assert max(_segments_per_batch(state)) >= 2, "the batch was not split into segments"
    downstream.execute(f"DROP DATABASE IF EXISTS `{schema}`", "DROP DATABASE IF EXISTS `progress_turns_kill`")
    replay_once(tansu.sink_uri(topic, "protocol=canal-json"), downstream.port, "progress_turns_kill", config)
    assert_tables_equal(mariadb, downstream, schema)
    downstream.execute(f"DROP DATABASE IF EXISTS `{schema}`", "DROP DATABASE IF EXISTS `progress_turns_kill`")
    mariadb.execute(f"DROP DATABASE IF EXISTS `{schema}`")
