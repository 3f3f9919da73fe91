"""MySQL sink faults: the downstream MariaDB restarted mid-batch, a downstream table dropped by hand.

The sink is the replica itself (``mysql://``), so after the restart the replica must equal the
upstream with no consumer in between: the batch the restart broke is written again (upserts and
deletes by key, so the replay is idempotent).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from sparkcdc.services.mariadb import LocalMariaDB
from tests.e2e.workload import CliProcess, mixed_rounds, run_args, tso

from .support import assert_rows_equal, create_round_tables, restart_mariadb, wait_checkpoint

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.spark]

SCHEMA = "fault_mysql"
CHANGEFEED = "fault-mysql-sink"


def test_downstream_restart_mid_batch_then_dropped_table(
    upstream: LocalMariaDB, replica: LocalMariaDB, tmp_path: Path
) -> None:
    t0 = time.monotonic()
    start_ts = tso(upstream.uri)
    create_round_tables(upstream, SCHEMA)
    config = tmp_path / "cf.toml"
    config.write_text(f'[filter]\nrules = ["{SCHEMA}.*"]\n')
    data_dir = tmp_path / "data"
    sink_uri = f"mysql://root:@127.0.0.1:{replica.port}/"
    run = CliProcess(
        run_args(upstream.uri, sink_uri, CHANGEFEED, data_dir, "--start-ts", str(start_ts), config=config),
        tmp_path / "run.log",
    )
    try:
        run.wait_started(timeout=240)
        mixed_rounds(upstream, SCHEMA, 1, 40)
        wait_checkpoint(run, data_dir, CHANGEFEED, tso(upstream.uri), 120, "the first rows")

        # A stream of writes, and the downstream restarted while batches of it are being applied.
        writer = threading.Thread(target=mixed_rounds, args=(upstream, SCHEMA, 41, 300), daemon=True)
        writer.start()
        restart_mariadb(replica, down_for=3)
        writer.join(timeout=120)
        assert not writer.is_alive()
        wait_checkpoint(run, data_dir, CHANGEFEED, tso(upstream.uri), 180, "the changefeed to catch up")
        assert_rows_equal(upstream, replica, SCHEMA)
        assert "warning: [CDC:ErrSinkUnavailable]" in run.output(), run.output()[-4000:]
        restarted = time.monotonic() - t0

        # A table dropped on the downstream by hand: the next change to it fails, naming the table.
        replica.execute(f"DROP TABLE {SCHEMA}.`sel``ect %s`")
        upstream.execute(f"INSERT INTO {SCHEMA}.`sel``ect %s` (`order`, `a``b`) VALUES (-1, 'after drop')")
        rc = run.wait(timeout=180)
    finally:
        run.stop()
    out = run.output()
    assert rc != 0, out[-4000:]
    final = [line for line in out.splitlines() if line.startswith("Error: [")]
    assert len(final) == 1 and "sel`ect %s" in final[0] and SCHEMA in final[0], out[-4000:]
    print(f"mysql sink: restart {restarted:.0f}s, dropped table {time.monotonic() - t0 - restarted:.0f}s")
    print(final[0])
