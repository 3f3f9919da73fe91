"""e2e: MariaDB → `sparkcdc run` (Spark) → Kafka canal-json (Tansu) → `sparkcdc consumer` → MariaDB.

A mixed workload over every type (inserts, updates including primary-key
changes, deletes, a table without a primary key, hostile names), an ALTER TABLE
in the middle of the stream, and a kill -9 of the changefeed while rows flow, then a restart with the
same id. The consumer replays the topic into a second MariaDB; in the
end every table there equals the upstream, row for row.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.consumer.kafka import run_kafka_consumer
from sparkcdc.services.common import wait_until
from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.tansu import LocalTansu
from tests.e2e.workload import CliProcess, mixed_rounds, round_tables_sql, run_args, table_rows

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

DB = "e2e_kafka_sink"
TOPIC = "e2e-canal"
TEXT_SUFFIX = " <&>"


@pytest.fixture(scope="module")
def downstream() -> Iterator[LocalMariaDB]:
    """The downstream MariaDB (no binlog)."""
    with LocalMariaDB(binlog=False) as db:
        yield db


def test_kafka_canal_json_e2e_with_ddl_and_restart(
    mariadb: LocalMariaDB, downstream: LocalMariaDB, tansu: LocalTansu, tmp_path: Path
) -> None:
    mariadb.execute(f"DROP DATABASE IF EXISTS {DB}")
    config = tmp_path / "cf.toml"
    # index-value dispatch: rows of one table spread over the partitions by primary key, and a key
    # change splits into a DELETE and an INSERT that may land on different partitions
    config.write_text(
        f'[filter]\nrules = ["{DB}.*"]\n[sink]\ndispatchers = [{{matcher = ["{DB}.*"], partition = "index-value"}}]\n'
    )
    sink_uri = tansu.sink_uri(TOPIC, "protocol=canal-json&enable-tidb-extension=true&partition-num=3")
    args = run_args(
        mariadb.uri,
        sink_uri,
        "e2e-kafka",
        tmp_path / "data",
        "--trigger-interval",
        "300 milliseconds",
        config=config,
    )
    down_uri = f"mysql://root:@127.0.0.1:{downstream.port}/"
    up_uri = tansu.sink_uri(TOPIC, "protocol=canal-json")

    def caught_up() -> bool:
        run_kafka_consumer(up_uri, down_uri, ReplicaConfig(), once=True, timeout=60)
        return table_rows(downstream, DB) == table_rows(mariadb, DB)

    run1 = CliProcess(args, tmp_path / "run1.log")
    try:
        run1.wait_started()
        mariadb.execute(*round_tables_sql(DB))
        mixed_rounds(mariadb, DB, 0, 20, TEXT_SUFFIX)
        wait_until(
            caught_up,
            timeout=180,
            what="downstream to catch up (run 1)",
            interval=1.0,
            on_timeout=lambda: run1.output()[-3000:],
        )
        # a DDL in the middle of the stream, rows of the new shape, and a restart while they flow
        mariadb.execute(f"ALTER TABLE {DB}.all_types ADD COLUMN extra VARCHAR(10) DEFAULT 'dflt' AFTER ti")
        feeder = threading.Thread(target=mixed_rounds, args=(mariadb, DB, 20, 30, TEXT_SUFFIX))
        feeder.start()
        wait_until(lambda: "ALTER TABLE" in run1.output(), timeout=120, what="the ALTER to reach the sink")
        run1.stop(signal.SIGKILL)  # kill -9 while rows flow: the restart re-sends from the checkpoint
        feeder.join(timeout=120)
    finally:
        run1.stop(signal.SIGKILL)
    run2 = CliProcess(args, tmp_path / "run2.log")
    try:
        run2.wait_started()
        mixed_rounds(mariadb, DB, 50, 5, TEXT_SUFFIX)
        mariadb.execute(f"UPDATE {DB}.all_types SET extra = 'later' WHERE id % 2 = 0")
        wait_until(
            caught_up,
            timeout=240,
            what="downstream to equal upstream after the restart",
            interval=1.0,
            on_timeout=lambda: run2.output()[-3000:],
        )
        final = table_rows(downstream, DB)
        assert len(final["all_types"]) == 55 and len(final["nopk"]) > 80
        assert any(r[0] == str(1000000 + 1) for r in final["all_types"])  # the key change arrived
        assert "extra" in {
            r[0]
            for r in downstream.query(
                "SELECT column_name FROM information_schema.columns WHERE table_schema=%s AND table_name='all_types'",
                (DB,),
            )
        }
    finally:
        run2.stop()
        mariadb.execute(f"DROP DATABASE IF EXISTS {DB}")
