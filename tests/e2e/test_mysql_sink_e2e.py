"""e2e: MariaDB → `sparkcdc run` (Spark) → MySQL sink → a second MariaDB, with DDL, every type and kill -9.

The upstream runs a mixed workload (inserts, updates including key changes,
deletes, a table without a primary key, hostile names, an ALTER TABLE in the
middle); the `sparkcdc run` process is killed with SIGKILL while rows stream
and started again with the same changefeed id. In the end the downstream
tables must equal the upstream ones, row for row.
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

from sparkcdc.services.common import wait_until
from sparkcdc.services.mariadb import LocalMariaDB

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

DB = "e2e_mysql_sink"
TABLES = {
    "all_types": "id",
    "nopk": "a, b",
    "sel`ect %s": "`order`",
}


@pytest.fixture(scope="module")
def downstream() -> Iterator[LocalMariaDB]:
    """The downstream MariaDB (no binlog)."""
    with LocalMariaDB(binlog=False) as db:
        yield db


class RunProcess:
    """One `sparkcdc run` child process with its output collected."""

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
        wait_until(
            lambda: self.proc.poll() is not None or "started; data dir" in self.output(),
            timeout=timeout,
            what="sparkcdc run to start",
            interval=0.5,
            on_timeout=lambda: self.output()[-4000:],
        )
        if self.proc.poll() is not None:
            raise AssertionError(f"sparkcdc run exited with {self.proc.returncode}:\n{self.output()[-4000:]}")

    def kill9(self) -> None:
        """SIGKILL the whole process group (the driver and Spark's JVM and Python workers)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)
        self.log.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        if not self.log.closed:
            self.log.close()


def snapshot(db: LocalMariaDB) -> dict[str, list[tuple[Any, ...]]]:
    """Every table of DB as server text, ordered, for a row-for-row comparison."""
    conn = db.connect(conv={})
    out: dict[str, list[tuple[Any, ...]]] = {}
    try:
        with conn.cursor() as cur:
            for t, order in TABLES.items():
                try:
                    cur.execute(f"SELECT * FROM `{DB}`.`{t.replace('`', '``')}` ORDER BY {order}")
                except Exception as exc:  # the table may not have been replicated yet
                    out[t] = [("missing", str(exc))]
                    continue
                out[t] = list(cur.fetchall())
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
                        f"hé'llo\\ {i} 😀",
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
                        "UPDATE all_types SET vc = CONCAT(vc, '!'), d = d * 2, j = JSON_SET(j, '$.u', 1) "
                        "WHERE id = %s",
                        (i,),
                    )
                if i % 5 == 1:
                    # A key change: id moves to a free range.
                    cur.execute("UPDATE all_types SET id = id + 1000000 WHERE id = %s", (i,))
                if i % 4 == 2:
                    cur.execute("DELETE FROM nopk WHERE a = %s AND c IS NULL", (i,))
                    cur.execute("UPDATE nopk SET b = 'y' WHERE a = %s", (i,))
                if i % 7 == 3:
                    cur.execute("DELETE FROM `sel``ect %%s` WHERE `order` = %s", (i,))
                conn.commit()
    finally:
        conn.close()


def test_mysql_sink_e2e_with_ddl_and_kill9(
    mariadb: LocalMariaDB, downstream: LocalMariaDB, tmp_path: Path
) -> None:
    mariadb.execute(f"DROP DATABASE IF EXISTS {DB}")
    config = tmp_path / "cf.toml"
    config.write_text(f'[filter]\nrules = ["{DB}.*"]\n')
    args = [
        "run",
        "--upstream-uri",
        mariadb.uri,
        "--sink-uri",
        f"mysql://root:@127.0.0.1:{downstream.port}/?worker-count=4&max-txn-row=64",
        "--config",
        str(config),
        "-c",
        "e2e-mysql",
        "--data-dir",
        str(tmp_path / "data"),
        "--master",
        "local[2]",
        "--no-progress",
        "--trigger-interval",
        "300 milliseconds",
    ]
    run1 = RunProcess(args, tmp_path / "run1.log")
    try:
        run1.wait_started()
        # Everything, including the schema, comes through the changefeed as DDL.
        mariadb.execute(
            f"CREATE DATABASE {DB}",
            f"""CREATE TABLE {DB}.all_types (
              id INT PRIMARY KEY, ti TINYINT, biu BIGINT UNSIGNED, f FLOAT, d DOUBLE, dec1 DECIMAL(10,2),
              dt DATE, dtm DATETIME(3), ts TIMESTAMP(6) NULL, tm TIME, y YEAR, vc VARCHAR(64), tx TEXT,
              bn BINARY(4), vb VARBINARY(16), e ENUM('a','b','c'), s SET('x','y','z'), b8 BIT(8), j JSON)""",
            f"CREATE TABLE {DB}.nopk (a INT, b VARCHAR(10), c VARCHAR(10))",
            f"CREATE TABLE {DB}.`sel``ect %s` (`order` INT PRIMARY KEY, `a``b` VARCHAR(20), `%d` CHAR(1))",
        )
        workload(mariadb, 0, 60)
        wait_until(
            lambda: snapshot(downstream) == snapshot(mariadb),
            timeout=180,
            what="downstream to catch up (run 1)",
            interval=1.0,
            on_timeout=lambda: run1.output()[-3000:],
        )
        # A DDL in the middle of the stream, then rows of the new shape; kill -9 while they flow.
        mariadb.execute(f"ALTER TABLE {DB}.all_types ADD COLUMN extra VARCHAR(10) DEFAULT 'dflt' AFTER ti")
        killed = threading.Event()
        fed: list[int] = []

        def feed() -> None:
            # Keeps writing until the kill, then 20 rounds more while sparkcdc is down.
            i = 60
            while not killed.is_set():
                workload(mariadb, i, 1)
                i += 1
            workload(mariadb, i, 20)
            fed.append(i + 20)

        feeder = threading.Thread(target=feed)
        feeder.start()
        wait_until(
            lambda: (
                downstream.query(
                    "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema=%s AND column_name='extra'",
                    (DB,),
                )[0][0]
                == 1
                and downstream.query(f"SELECT COUNT(*) FROM {DB}.nopk WHERE a >= 70")[0][0] > 0
            ),
            timeout=180,
            what="rows after the DDL to arrive",
            interval=0.5,
        )
        run1.kill9()
        killed.set()
        feeder.join(timeout=120)
        assert fed, "the feeder did not finish"
    finally:
        run1.stop()
    run2 = RunProcess(args, tmp_path / "run2.log")
    try:
        run2.wait_started()
        workload(mariadb, fed[0], 20)
        mariadb.execute(f"UPDATE {DB}.all_types SET extra = 'later' WHERE id % 2 = 0")
        wait_until(
            lambda: snapshot(downstream) == snapshot(mariadb),
            timeout=240,
            what="downstream to equal upstream after the restart",
            interval=1.0,
            on_timeout=lambda: run2.output()[-3000:],
        )
        final = snapshot(downstream)
        assert len(final["all_types"]) == fed[0] + 20 and len(final["nopk"]) == sum(
            1 if i % 4 == 2 else 2 for i in range(fed[0] + 20)
        )
        # Rows were in flight at the kill; the restart skipped what was already applied.
        progress = downstream.query(
            "SELECT COUNT(*) FROM sparkcdc.mysql_sink_progress WHERE changefeed_id = 'e2e-mysql'"
        )
        assert progress == [(3,)]
        assert any(r[0] == str(1000000 + 1) for r in final["all_types"])  # the key change arrived
    finally:
        run2.stop()
        mariadb.execute(f"DROP DATABASE IF EXISTS {DB}")
