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

import pytest

from sparkcdc.pipeline import plan
from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.tansu import LocalTansu
from tests.integration.kafka.conftest import consume_all

from .test_storage_segments import _run, _segments_per_batch
from .workload import assert_tables_equal, replay_once, run_workload, tso

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

SCHEMA = "e2e_kafka_turns"


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
    config = tmp_path / "cf.toml"
    config.write_text(
        f'[filter]\nrules = ["{SCHEMA}.*"]\n'
        f'[sink]\ndispatchers = [{{matcher = ["{SCHEMA}.*"], partition = "index-value"}}]\n'
    )
    topic = f"turns-{uuid.uuid4().hex[:8]}"
    sink_uri = tansu.sink_uri(topic, "protocol=canal-json&enable-tidb-extension=true&partition-num=3")
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
