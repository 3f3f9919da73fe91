"""``--start-ts`` is exclusive, and a ``--target-ts`` the changefeed already reached is refused.

A row is committed, its commit_ts read from the binlog, then a second row; a changefeed started
at exactly the first row's commit_ts must deliver the second row and never the first (nor any
transaction at or below the start-ts). Run again with a ``--target-ts`` below the checkpoint the
first run reached, the command exits non-zero in one line at once instead of reporting success.
"""

from __future__ import annotations

import csv
import io
import time
from pathlib import Path

import pytest

from sparkcdc.capture.reader import Scanner
from sparkcdc.capture.start import head_offset
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.services.mariadb import LocalMariaDB

from .workload import CliProcess, run_args, tso

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


def _records(root: Path) -> list[list[str]]:
    out: list[list[str]] = []
    for f in sorted(root.rglob("CDC*.csv")):
        out.extend(csv.reader(io.StringIO(f.read_text(), newline="")))
    return out


def test_nothing_at_or_before_start_ts_is_delivered_and_a_reached_target_is_refused(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    up = UpstreamConfig.from_uri(mariadb.uri)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, v VARCHAR(10))")
    before = head_offset(up)
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1, 'before')")
    first = [txn.ts for txn in Scanner(up).scan(before) if (fresh_db, "t") in txn.tables]
    assert len(first) == 1, first
    start_ts = first[0]
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (2, 'after')")
    target_ts = tso(mariadb.uri)

    sink = tmp_path / "sink"
    config = tmp_path / "cf.toml"
    config.write_text(f'[filter]\nrules = ["{fresh_db}.*"]\n[sink.csv]\ninclude-commit-ts = true\n')
    common = run_args(
        mariadb.uri,
        f"file://{sink}?protocol=csv",
        "start-ts-boundary",
        tmp_path / "data",
        config=config,
        master="local[1]",
    )
    run = CliProcess(
        [*common, "--start-ts", str(start_ts), "--target-ts", str(target_ts)], tmp_path / "run.log"
    )
    try:
        rc = run.wait(timeout=300)
    finally:
        run.stop()
    assert rc == 0, run.output()[-4000:]
    records = _records(sink)
    assert [r[4:] for r in records] == [["2", "after"]], records
    assert all(int(r[3]) > start_ts for r in records)

    t0 = time.monotonic()
    again = CliProcess([*common, "--target-ts", str(start_ts)], tmp_path / "again.log")
    try:
        rc = again.wait(timeout=60)
    finally:
        again.stop()
    out = again.output()
    assert rc != 0 and time.monotonic() - t0 < 30, out
    lines = out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: [CDC:ErrInvalidConfig]"), out
    assert f"--target-ts {start_ts} is not after the checkpoint-ts" in out, out
    assert "Traceback" not in out and "BrokenPipeError" not in out
