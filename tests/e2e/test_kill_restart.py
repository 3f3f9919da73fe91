"""e2e: kill -9 `sparkcdc run` while rows stream to storage, restart it, replay: nothing is lost.

The changefeed (file:// CSV with commit-ts) starts from a ts before the tables
were created, catches up, then follows a steady write load. Once batches have
committed it is killed with SIGKILL (the driver, Spark's JVM and its Python
workers at once) while the load goes on; it is started again with the same
changefeed id and data dir and a ``--target-ts`` taken after the load ended,
and exits 0 when the checkpoint reaches it. The consumer then replays the files
into the downstream, which must equal the upstream.

Delivery is at-least-once, and exactly which changes may be written twice is
checked here: only those of the batches Spark had not recorded as committed in
its checkpoint (``spark/commits``) when the process died, i.e. rows with a
commit_ts above the end offset of the last committed batch. The restart writes
them again into new files (numbering continues from ``meta/CDC.index``). The
storage consumer drops a copy whose commit_ts is at or below what it already
applied to that directory or table, and applies rows at the boundary in safe
mode (REPLACE / DELETE by key), so the downstream ends up exact.
"""

from __future__ import annotations

import csv
import io
import json
import re
import time
from collections import Counter
from pathlib import Path

import pytest

from sparkcdc.services.mariadb import LocalMariaDB

from .workload import (
    CliProcess,
    SteadyLoad,
    Workload,
    assert_tables_equal,
    create_tables,
    replay_once,
    run_args,
    tso,
    wait_for,
)

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

SCHEMA = "e2e_kill"
CHANGEFEED = "e2e-kill-restart"


def _state(data_dir: Path) -> dict[str, int]:
    """The changefeed's own checkpoint file (written after each committed batch)."""
    try:
        d = json.loads((data_dir / CHANGEFEED / "checkpoint.json").read_text())
    except (OSError, ValueError):
        return {}
    return {"checkpoint_ts": int(d["checkpoint_ts"]), "rows_total": int(d["rows_total"])}


def _last_committed_end_ts(data_dir: Path) -> int:
    """The end-offset ts of the last batch in Spark's commit log."""
    spark_dir = data_dir / CHANGEFEED / "spark"
    committed = [int(p.name) for p in (spark_dir / "commits").iterdir() if p.name.isdigit()]
    assert committed, "no batch was committed before the kill"
    lines = (spark_dir / "offsets" / str(max(committed))).read_text().splitlines()
    return int(json.loads(lines[2])["ts"])


def _csv_records(root: Path) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for f in sorted(root.rglob("CDC*.csv")):
        text = f.read_bytes().decode("utf-8")
        out.extend(tuple(r) for r in csv.reader(io.StringIO(text, newline="")))
    return out


def test_kill9_mid_stream_then_restart_loses_nothing(
    mariadb: LocalMariaDB, downstream: LocalMariaDB, tmp_path: Path
) -> None:
    start_ts = tso(mariadb.uri)
    create_tables(mariadb, SCHEMA)
    wl = Workload(mariadb, SCHEMA, rows=40)
    wl.phase_inserts()

    sink = tmp_path / "sink"
    data_dir = tmp_path / "data"
    config = tmp_path / "cf.toml"
    config.write_text(f'[filter]\nrules = ["{SCHEMA}.*"]\n[sink.csv]\ninclude-commit-ts = true\n')
    sink_uri = f"file://{sink}?protocol=csv"
    common = run_args(mariadb.uri, sink_uri, CHANGEFEED, data_dir, config=config)

    t0 = time.monotonic()
    marks: dict[str, float] = {}
    run1 = CliProcess([*common, "--start-ts", str(start_ts)], tmp_path / "run1.log")
    load = SteadyLoad(mariadb, SCHEMA, pause=0.05)
    try:
        run1.wait_for("started; data dir", timeout=240, what="the first run to start")
        marks["run1 started"] = time.monotonic() - t0
        load.start()
        # Batches of the live load are committed: past the catch-up, into the stream.
        first = wait_for(
            lambda: _state(data_dir).get("rows_total", 0) > 0 and _state(data_dir), 240, "a batch"
        )
        wait_for(
            lambda: _state(data_dir)["rows_total"] > first["rows_total"] + 50 and load.transactions > 100,
            240,
            "the live load to be replicated",
        )
        marks["killed"] = time.monotonic() - t0
        run1.kill9()
    finally:
        run1.stop()
    killed_at = _state(data_dir)
    committed_end = _last_committed_end_ts(data_dir)
    before_restart = _csv_records(sink)
    assert before_restart, "no data files before the kill"

    # The load goes on while the changefeed is down, then ends.
    seen = load.transactions
    wait_for(lambda: load.transactions > seen + 30, 60, "more load while the changefeed is down")
    total_txns = load.stop()
    target_ts = tso(mariadb.uri)

    run2 = CliProcess([*common, "--target-ts", str(target_ts)], tmp_path / "run2.log")
    try:
        rc = run2.wait(timeout=420)
    finally:
        run2.stop()
    marks["run2 done"] = time.monotonic() - t0
    out2 = run2.output()
    assert rc == 0, f"restart exited with {rc}:\n{out2[-4000:]}"
    assert f"reached target-ts {target_ts}" in out2
    resumed = _state(data_dir)
    assert resumed["checkpoint_ts"] >= target_ts > killed_at["checkpoint_ts"]
    assert json.loads((sink / "metadata").read_bytes())["checkpoint-ts"] >= target_ts

    # Only changes after the last batch Spark had committed may have been written twice.
    records = _csv_records(sink)
    dup = [r for r, n in Counter(records).items() if n > 1]
    assert all(int(r[3]) > committed_end for r in dup), f"duplicates at or below {committed_end}: {dup[:3]}"
    assert all(int(r[3]) > start_ts for r in records)

    out = replay_once(sink_uri, downstream.port, "progress_kill", config)
    m = re.search(r"applied (\d+) DDL, (\d+) rows .*\((\d+) replayed rows dropped", out)
    assert m and int(m.group(2)) > 0, out
    assert_tables_equal(mariadb, downstream, SCHEMA)
    assert total_txns > 130
    print(
        f"kill/restart: {total_txns} load transactions, {len(records)} CSV records, {len(dup)} written twice, "
        f"consumer dropped {m.group(3)}; timeline {marks}"
    )
    downstream.execute(f"DROP DATABASE IF EXISTS `{SCHEMA}`", "DROP DATABASE IF EXISTS progress_kill")
