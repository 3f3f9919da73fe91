"""e2e: MariaDB → `sparkcdc run` (Spark) → MySQL sink → a second MariaDB, with DDL, every type and kill -9.

The upstream runs a mixed workload (inserts, updates including key changes,
deletes, a table without a primary key, hostile names, an ALTER TABLE in the
middle); the `sparkcdc run` process is killed with SIGKILL while rows stream
and started again with the same changefeed id. In the end the downstream
tables must equal the upstream ones, row for row.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkcdc.services.common import wait_until
from sparkcdc.services.mariadb import LocalMariaDB

from .workload import CliProcess, mixed_rounds, round_tables_sql, run_args, table_rows

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

DB = "e2e_mysql_sink"


@pytest.fixture(scope="module")
def downstream() -> Iterator[LocalMariaDB]:
    """The downstream MariaDB (no binlog)."""
    with LocalMariaDB(binlog=False) as db:
        yield db


def test_mysql_sink_e2e_with_ddl_and_kill9(
    mariadb: LocalMariaDB, downstream: LocalMariaDB, tmp_path: Path
) -> None:
    mariadb.execute(f"DROP DATABASE IF EXISTS {DB}")
    config = tmp_path / "cf.toml"
    config.write_text(f'[filter]\nrules = ["{DB}.*"]\n')
    args = run_args(
        mariadb.uri,
        f"mysql://root:@127.0.0.1:{downstream.port}/?worker-count=4&max-txn-row=64",
        "e2e-mysql",
        tmp_path / "data",
        "--trigger-interval",
        "300 milliseconds",
        config=config,
    )
    run1 = CliProcess(args, tmp_path / "run1.log")
    try:
        run1.wait_started()
        # Everything, including the schema, comes through the changefeed as DDL.
        mariadb.execute(*round_tables_sql(DB))
        mixed_rounds(mariadb, DB, 0, 60)
        wait_until(
            lambda: table_rows(downstream, DB) == table_rows(mariadb, DB),
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
                mixed_rounds(mariadb, DB, i, 1)
                i += 1
            mixed_rounds(mariadb, DB, i, 20)
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
    run2 = CliProcess(args, tmp_path / "run2.log")
    try:
        run2.wait_started()
        mixed_rounds(mariadb, DB, fed[0], 20)
        mariadb.execute(f"UPDATE {DB}.all_types SET extra = 'later' WHERE id % 2 = 0")
        wait_until(
            lambda: table_rows(downstream, DB) == table_rows(mariadb, DB),
            timeout=240,
            what="downstream to equal upstream after the restart",
            interval=1.0,
            on_timeout=lambda: run2.output()[-3000:],
        )
        final = table_rows(downstream, DB)
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
