"""e2e: MariaDB → `sparkcdc run` (Spark) → Kafka canal-json (Tansu) → `sparkcdc consumer` → MariaDB.

A mixed workload over every type (inserts, updates including primary-key
changes, deletes, a table without a primary key, hostile names), an ALTER TABLE
in the middle of the stream, and a kill -9 of the changefeed while rows flow, then a restart with the
same id. The consumer replays the topic into a second MariaDB; in the
end every table there equals the upstream, row for row.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.consumer.kafka import run_kafka_consumer
from sparkcdc.services.common import wait_until
from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.tansu import LocalTansu

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

DB = "e2e_kafka_sink"
TOPIC = "e2e-canal"
TABLES = {"all_types": "id", "nopk": "a, b, c", "sel`ect %s": "`order`"}


@pytest.fixture(scope="module")
def downstream() -> Iterator[LocalMariaDB]:
    """The downstream MariaDB (no binlog)."""
    with LocalMariaDB(binlog=False) as db:
        yield db


@pytest.fixture(scope="module")
def kafka() -> Iterator[LocalTansu]:
    with LocalTansu() as broker:
        yield broker


class RunProcess:
    """One `sparkcdc run` child process (its own process group) with its output in a file."""

    def __init__(self, args: list[str], log_path: Path) -> None:
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
        self.log_path = log_path
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sparkcdc.cli.main", *args],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_started(self, timeout: float = 180) -> None:
        def started() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"sparkcdc run exited with {self.proc.returncode}:\n{self.output()[-4000:]}"
                )
            return "started; data dir" in self.output()

        wait_until(
            started,
            timeout=timeout,
            what="sparkcdc run to start",
            interval=0.5,
            on_timeout=lambda: self.output()[-4000:],
        )

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        if not self.log.closed:
            self.log.close()


def snapshot(db: LocalMariaDB) -> dict[str, list[tuple[Any, ...]]]:
    """Every table of DB as server text, ordered."""
    conn = db.connect(conv={})
    out: dict[str, list[tuple[Any, ...]]] = {}
    try:
        with conn.cursor() as cur:
            for t, order in TABLES.items():
                try:
                    cur.execute(f"SELECT * FROM `{DB}`.`{t.replace('`', '``')}` ORDER BY {order}")
                except Exception as exc:  # not replicated yet
                    out[t] = [("missing", str(exc))]
                    continue
                out[t] = sorted(cur.fetchall(), key=repr) if t == "nopk" else list(cur.fetchall())
    finally:
        conn.close()
    return out


def workload(up: LocalMariaDB, start: int, n: int) -> None:
    """n rounds of mixed changes, one or two transactions each."""
    conn = up.connect(DB)
    try:
        with conn.cursor() as cur:
            for i in range(start, start + n):
                cur.execute(
                    "INSERT INTO all_types (id, ti, biu, f, d, dec1, dt, dtm, ts, tm, y, vc, tx, bn, vb, e, s, b8, j) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        i,
                        i % 128 - 64,
                        2**64 - 1 - i,
                        i / 8,
                        i / 3,
                        f"{i}.25",
                        "2024-02-29",
                        "2024-01-02 03:04:05.678",
                        "2024-06-01 12:00:00.123456",
                        "-12:34:56",
                        1901 + i % 255,
                        f"hé'llo\\ {i} 😀 <&>",
                        "x" * (i % 50) + '\n\t"',
                        bytes([i % 256, 0, 255, 1]),
                        bytes([0, i % 256, 39, 92]),
                        "abc"[i % 3],
                        "x,z" if i % 2 else "",
                        i % 256,
                        f'{{"i": {i}, "s": "<&>"}}',
                    ),
                )
                cur.execute(
                    "INSERT INTO nopk (a, b, c) VALUES (%s, %s, NULL), (%s, %s, 'dup')", (i, "x", i, "x")
                )
                cur.execute(
                    "INSERT INTO `sel``ect %%s` (`order`, `a``b`, `%%d`) VALUES (%s, %s, %s)",
                    (i, f"v{i}", "'"),
                )
                conn.commit()
                if i % 3 == 0:
                    cur.execute(
                        "UPDATE all_types SET vc = CONCAT(vc, '!'), d = d * 2, j = JSON_SET(j, '$.u', 1) WHERE id = %s",
                        (i,),
                    )
                if i % 5 == 1:
                    cur.execute("UPDATE all_types SET id = id + 1000000 WHERE id = %s", (i,))
                if i % 4 == 2:
                    cur.execute("DELETE FROM nopk WHERE a = %s AND c IS NULL", (i,))
                    cur.execute("UPDATE nopk SET b = 'y' WHERE a = %s", (i,))
                if i % 7 == 3:
                    cur.execute("DELETE FROM `sel``ect %%s` WHERE `order` = %s", (i,))
                conn.commit()
    finally:
        conn.close()


def test_kafka_canal_json_e2e_with_ddl_and_restart(
    mariadb: LocalMariaDB, downstream: LocalMariaDB, kafka: LocalTansu, tmp_path: Path
) -> None:
    mariadb.execute(f"DROP DATABASE IF EXISTS {DB}")
    config = tmp_path / "cf.toml"
    # index-value dispatch: rows of one table spread over the partitions by primary key, and a key
    # change splits into a DELETE and an INSERT that may land on different partitions
    config.write_text(
        f'[filter]\nrules = ["{DB}.*"]\n[sink]\ndispatchers = [{{matcher = ["{DB}.*"], partition = "index-value"}}]\n'
    )
    sink_uri = kafka.sink_uri(TOPIC, "protocol=canal-json&enable-tidb-extension=true&partition-num=3")
    args = [
        "run",
        "--upstream-uri",
        mariadb.uri,
        "--sink-uri",
        sink_uri,
        "--config",
        str(config),
        "-c",
        "e2e-kafka",
        "--data-dir",
        str(tmp_path / "data"),
        "--master",
        "local[2]",
        "--no-progress",
        "--trigger-interval",
        "300 milliseconds",
    ]
    down_uri = f"mysql://root:@127.0.0.1:{downstream.port}/"
    up_uri = kafka.sink_uri(TOPIC, "protocol=canal-json")

    def caught_up() -> bool:
        run_kafka_consumer(up_uri, down_uri, ReplicaConfig(), once=True, timeout=60)
        return snapshot(downstream) == snapshot(mariadb)

    run1 = RunProcess(args, tmp_path / "run1.log")
    try:
        run1.wait_started()
        mariadb.execute(
            f"CREATE DATABASE {DB}",
            f"""CREATE TABLE {DB}.all_types (
              id INT PRIMARY KEY, ti TINYINT, biu BIGINT UNSIGNED, f FLOAT, d DOUBLE, dec1 DECIMAL(10,2),
              dt DATE, dtm DATETIME(3), ts TIMESTAMP(6) NULL, tm TIME, y YEAR, vc VARCHAR(64), tx TEXT,
              bn BINARY(4), vb VARBINARY(16), e ENUM('a','b','c'), s SET('x','y','z'), b8 BIT(8), j JSON)""",
            f"CREATE TABLE {DB}.nopk (a INT, b VARCHAR(10), c VARCHAR(10))",
            f"CREATE TABLE {DB}.`sel``ect %s` (`order` INT PRIMARY KEY, `a``b` VARCHAR(20), `%d` CHAR(1))",
        )
        workload(mariadb, 0, 20)
        wait_until(
            caught_up,
            timeout=180,
            what="downstream to catch up (run 1)",
            interval=1.0,
            on_timeout=lambda: run1.output()[-3000:],
        )
        # a DDL in the middle of the stream, rows of the new shape, and a restart while they flow
        mariadb.execute(f"ALTER TABLE {DB}.all_types ADD COLUMN extra VARCHAR(10) DEFAULT 'dflt' AFTER ti")
        feeder = threading.Thread(target=workload, args=(mariadb, 20, 30))
        feeder.start()
        wait_until(lambda: "ALTER TABLE" in run1.output(), timeout=120, what="the ALTER to reach the sink")
        run1.stop(signal.SIGKILL)  # kill -9 while rows flow: the restart re-sends from the checkpoint
        feeder.join(timeout=120)
    finally:
        run1.stop(signal.SIGKILL)
    run2 = RunProcess(args, tmp_path / "run2.log")
    try:
        run2.wait_started()
        workload(mariadb, 50, 5)
        mariadb.execute(f"UPDATE {DB}.all_types SET extra = 'later' WHERE id % 2 = 0")
        wait_until(
            caught_up,
            timeout=240,
            what="downstream to equal upstream after the restart",
            interval=1.0,
            on_timeout=lambda: run2.output()[-3000:],
        )
        final = snapshot(downstream)
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
