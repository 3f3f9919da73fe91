"""A transaction of 1,000,000 rows is streamed: every row arrives, one commit_ts, bounded memory."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from sparkcdc.capture.start import head_offset
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.services.mariadb import LocalMariaDB

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ROWS = 1_000_000
MAX_RSS_GROWTH = 64 * 1024 * 1024
"""Below the transaction's binlog size (asserted > 100 MB): holding its events or rows whole exceeds this."""

# Runs in a fresh interpreter so ru_maxrss measures this read alone.
READER = textwrap.dedent(
    """
    import json, sys, time
    import psutil
    from sparkcdc.capture.offset import Offset
    from sparkcdc.capture.reader import RowReader
    from sparkcdc.capture.upstream import UpstreamConfig
    from sparkcdc.model import RowChange

    uri, start, end = sys.argv[1], Offset.from_json(json.loads(sys.argv[2])), Offset.from_json(json.loads(sys.argv[3]))
    up = UpstreamConfig.from_uri(uri)
    base = psutil.Process().memory_info().rss
    rows = 0
    id_sum = 0
    ts = set()
    ops = set()
    boundaries = []
    t0 = time.monotonic()
    for ev in RowReader(up, start, end).events():
        if isinstance(ev, RowChange):
            rows += 1
            id_sum += ev.after[0]
            ts.add(ev.commit_ts)
            ops.add(ev.op)
        else:
            boundaries.append(ev.to_json())
    elapsed = time.monotonic() - t0
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over fork+exec, so a large parent (a long
    # pytest session) would show up as this reader's peak.
    with open("/proc/self/status") as f:
        peak = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    print(json.dumps({"rows": rows, "id_sum": id_sum, "ts": sorted(ts), "ops": sorted(ops),
                      "boundaries": boundaries, "growth": peak - base, "elapsed": elapsed}))
    """
)


@pytest.fixture(scope="module")
def big_db() -> Iterator[LocalMariaDB]:
    """A private server: 100+ MB of binlog would slow every later head_offset on the shared one."""
    with LocalMariaDB() as db:
        yield db


def test_one_million_row_transaction_is_streamed(big_db: LocalMariaDB) -> None:
    up = UpstreamConfig.from_uri(big_db.uri)
    big_db.execute(
        "CREATE DATABASE big",
        "CREATE TABLE big.t (id INT PRIMARY KEY, n BIGINT NOT NULL, s VARCHAR(120) NOT NULL)",
    )
    start = head_offset(up)
    t0 = time.monotonic()
    big_db.execute(
        f"INSERT INTO big.t SELECT seq, seq * 7, REPEAT(CHAR(65 + seq % 26), 100) FROM seq_1_to_{ROWS}",
        database="big",
    )
    write_s = time.monotonic() - t0
    end = head_offset(up)
    assert end.file == start.file
    txn_bytes = end.pos - start.pos
    assert txn_bytes > 100 * 1024 * 1024, f"the transaction is only {txn_bytes} bytes of binlog"

    res = subprocess.run(
        [sys.executable, "-c", READER, big_db.uri, json.dumps(start.to_json()), json.dumps(end.to_json())],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout)
    assert got["rows"] == ROWS
    assert got["id_sum"] == ROWS * (ROWS + 1) // 2
    assert got["ops"] == ["I"]
    assert len(got["ts"]) == 1, f"one transaction, one commit_ts; got {len(got['ts'])}"
    assert got["boundaries"] == [end.to_json()], "a single boundary, after the whole transaction"
    assert got["ts"][0] == end.ts
    assert got["growth"] < MAX_RSS_GROWTH, (
        f"reading {txn_bytes / 2**20:.0f} MB of one transaction grew RSS by {got['growth'] / 2**20:.0f} MB"
    )
    print(
        f"\n1M-row txn: {txn_bytes / 2**20:.0f} MB binlog, write {write_s:.1f}s, read {got['elapsed']:.1f}s "
        f"({ROWS / got['elapsed']:.0f} rows/s), RSS growth {got['growth'] / 2**20:.1f} MB"
    )
