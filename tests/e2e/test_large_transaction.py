"""e2e: one large transaction streams through the storage sink, complete and in order.

A single upstream transaction inserts N rows and then updates the first thousand of them. It is
one batch (a batch ends only at a transaction boundary) of one segment, decoded and written by one
Spark task. With ``file-size`` at its 1 MiB minimum the writer must cut the table's data into
several files while the transaction streams through it (nothing holds the whole transaction), and
the files, read in their numbered order, must hold every row once: the N inserts by id, then the
updates by id, all with the transaction's commit_ts.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.services.mariadb import LocalMariaDB

from .workload import tso

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

SCHEMA = "e2e_bigtxn"
ROWS = 300_000
UPDATED = 1_000


def test_one_large_transaction_streams_in_order(spark: Any, mariadb: LocalMariaDB, tmp_path: Path) -> None:
    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.pipeline.changefeed import start_changefeed
    from sparkcdc.pipeline.spec import ChangefeedSpec

    mariadb.execute(
        f"DROP DATABASE IF EXISTS {SCHEMA}",
        f"CREATE DATABASE {SCHEMA}",
        f"CREATE TABLE {SCHEMA}.t (id INT PRIMARY KEY, v VARCHAR(32))",
    )
    start_ts = tso(mariadb.uri)
    mariadb.execute(
        "BEGIN",
        f"INSERT INTO {SCHEMA}.t SELECT seq, CONCAT('row-', seq) FROM {SCHEMA}.seq_1_to_{ROWS}",
        f"UPDATE {SCHEMA}.t SET v = CONCAT('updated-', id) WHERE id <= {UPDATED}",
        "COMMIT",
    )
    target_ts = tso(mariadb.uri)
    config = tmp_path / "cf.toml"
    config.write_text(f'[filter]\nrules = ["{SCHEMA}.*"]\n[sink.csv]\ninclude-commit-ts = true\n')
    out = tmp_path / "out"
    state = tmp_path / "state"
    spec = ChangefeedSpec(
        changefeed_id="bigtxn",
        upstream_uri=mariadb.uri,
        sink_uri=f"file://{out}?protocol=csv&file-size=1048576",
        config=ReplicaConfig.from_file(config),
        start_ts=start_ts,
        target_ts=target_ts,
        checkpoint_dir=str(state),
    )
    running = start_changefeed(spark, spec)
    try:
        assert running.wait(timeout=300), f"did not reach target-ts: {running.exception()}"
    finally:
        running.stop()

    ends = [json.loads(p.read_text().splitlines()[2]) for p in (state / "spark" / "offsets").glob("[0-9]*")]
    dml = [e for e in ends if e.get("segments")]
    assert [e["segments"] for e in dml] == [1], f"the transaction is one batch of one segment: {ends}"

    directory = out / SCHEMA / "t"
    files = sorted(directory.rglob("CDC*.csv"))
    assert len(files) >= 5, f"{len(files)} files: the writer did not cut the transaction at file-size"
    assert all(f.stat().st_size <= 1048576 + 256 for f in files)
    records = []
    for f in files:
        records.extend(csv.reader(io.StringIO(f.read_text(), newline="")))
    assert {int(r[3]) for r in records} == {int(records[0][3])}, "one transaction, one commit_ts"
    assert int(records[0][3]) <= target_ts
    got = [(r[0], int(r[4]), r[5]) for r in records]
    want = [("I", i, f"row-{i}") for i in range(1, ROWS + 1)]
    want += [("U", i, f"updated-{i}") for i in range(1, UPDATED + 1)]
    assert len(got) == len(want)
    assert got == want
