"""e2e: the progress line of a catch-up over an old backlog counts binlog bytes, not the lag.

A backlog is written before ``sparkcdc run`` starts (and more rows after its target-ts), then read
in small micro-batches. Every "catching up N%" line must rise monotonically, track the share of the
backlog's rows already written (the rows are all the same size, so bytes and rows go together: a
share taken from the lag would stay near 0 until the very end), and end near 100 % of the backlog
up to the target-ts offset, not of the binlog's head beyond it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sparkcdc.services.mariadb import LocalMariaDB

from .workload import CliProcess, tso

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

BACKLOG_ROWS = 24_000
PER_TXN = 400
LINE = re.compile(r"catching up (\d+)% binlog .*?, rows ([\d,]+) ")


def insert_rows(db: LocalMariaDB, schema: str, first: int, n: int) -> None:
    pad = "x" * 200
    db.execute(
        *(
            f"INSERT INTO `{schema}`.t VALUES "
            + ", ".join(f"({i}, '{pad}')" for i in range(start, min(start + PER_TXN, first + n)))
            for start in range(first, first + n, PER_TXN)
        )
    )


def test_catch_up_lines_rise_with_the_bytes_read(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, pad VARCHAR(255))")
    start_ts = tso(mariadb.uri)
    insert_rows(mariadb, fresh_db, 0, BACKLOG_ROWS)
    target_ts = tso(mariadb.uri)
    # after the target: in the binlog's head, not in the backlog the run reads
    insert_rows(mariadb, fresh_db, BACKLOG_ROWS, BACKLOG_ROWS // 2)
    config = tmp_path / "cf.toml"
    config.write_text(f'[filter]\nrules = ["{fresh_db}.t"]\n')
    args = [
        "run",
        "--upstream-uri",
        mariadb.uri,
        "--sink-uri",
        f"file://{tmp_path / 'sink'}?protocol=csv",
        "--config",
        str(config),
        "-c",
        "catch-up",
        "--data-dir",
        str(tmp_path / "data"),
        "--master",
        "local[2]",
        "--start-ts",
        str(start_ts),
        "--target-ts",
        str(target_ts),
        "--max-batch-bytes",
        str(256 << 10),
        "--progress-interval",
        "0",
    ]
    proc = CliProcess(args, tmp_path / "run.log")
    rc = proc.wait(timeout=240)
    out = proc.output()
    assert rc == 0, out[-4000:]
    shares = [(int(m.group(1)), int(m.group(2).replace(",", ""))) for m in LINE.finditer(out)]
    moving = [s for s in shares if 0 < s[1] < BACKLOG_ROWS]
    assert len(moving) >= 3, out[-4000:]
    pcts = [p for p, _ in shares]
    assert pcts == sorted(pcts), pcts
    for pct, rows in moving:
        # the share of the bytes read is the share of the rows written, give or take the batch in flight
        assert abs(pct - 100 * rows / BACKLOG_ROWS) <= 15, (pct, rows, shares)
    assert pcts[-1] >= 90, shares
