"""An XA transaction prepared while a changefeed runs and committed after it stopped.

The first run ends (at a target-ts) past the XA PREPARE: its rows must not be in the sink
yet, and the checkpoint must not wait for them. The XA COMMIT comes while no changefeed
runs; the resumed run (same changefeed id and data dir) must deliver them, with the XA
COMMIT's commit_ts, after every change the first run delivered. A second XA transaction,
prepared before the first run's start, is committed in the second run's range too: the
reader finds its prepare in the binlog. A third is prepared and rolled back: never
delivered. The replica built by ``sparkcdc consumer`` equals the upstream.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkcdc.services.mariadb import LocalMariaDB
from tests.e2e.workload import assert_tables_equal, replay_once, run_args, run_cli, table_rows, tso

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]


def _xa_prepare(db: LocalMariaDB, schema: str, xid: str, statements: list[str]) -> None:
    """Prepare an XA transaction on a connection that then disconnects (the prepare survives it)."""
    conn = db.connect(schema)
    try:
        with conn.cursor() as cur:
            cur.execute(f"XA START '{xid}'")
            for s in statements:
                cur.execute(s)
            cur.execute(f"XA END '{xid}'")
            cur.execute(f"XA PREPARE '{xid}'")
    finally:
        conn.close()


def _recovered(db: LocalMariaDB) -> set[str]:
    return {r[3].decode() if isinstance(r[3], bytes) else str(r[3]) for r in db.query("XA RECOVER")}


def test_a_prepared_xa_waits_for_its_commit_across_a_restart(
    mariadb: LocalMariaDB, downstream: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    db = fresh_db
    try:
        _run(mariadb, downstream, db, tmp_path)
    finally:  # a prepared XA would hold its locks past the test and block the database's drop
        for xid in _recovered(mariadb) & {"xa-early", "xa-late", "xa-undone"}:
            mariadb.execute(f"XA ROLLBACK '{xid}'")


def _run(mariadb: LocalMariaDB, downstream: LocalMariaDB, db: str, tmp_path: Path) -> None:
    mariadb.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))",
        "CREATE TABLE e (id INT PRIMARY KEY, v VARCHAR(20))",
        database=db,
    )
    _xa_prepare(mariadb, db, "xa-early", ["INSERT INTO e VALUES (10, 'early xa')"])
    start = tso(mariadb.uri)
    _xa_prepare(mariadb, db, "xa-late", ["INSERT INTO t VALUES (20, 'late xa')"])
    _xa_prepare(mariadb, db, "xa-undone", ["INSERT INTO t VALUES (30, 'rolled back')"])
    mariadb.execute("INSERT INTO t VALUES (2, 'after prepare')", database=db)
    assert {"xa-early", "xa-late", "xa-undone"} <= _recovered(mariadb)
    first_target = tso(mariadb.uri)

    sink = tmp_path / "out"
    sink_uri = f"file://{sink}?protocol=canal-json"
    config = tmp_path / "cf.toml"
    config.write_text(f'[filter]\nrules = ["{db}.*"]\n')
    common = (mariadb.uri, sink_uri, "xa-restart", tmp_path / "data")
    res = run_cli(
        run_args(*common, "--start-ts", str(start), "--target-ts", str(first_target), config=config),
        timeout=300,
    )
    assert res.returncode == 0, res.stdout + res.stderr[-4000:]

    progress = f"{db}_progress"
    replay_once(sink_uri, downstream.port, progress)
    got = table_rows(downstream, db, ["t"])["t"]
    assert got == [("2", "after prepare")], f"prepared rows were delivered before their commit: {got}"

    # The XA transactions end while no changefeed runs.
    mariadb.execute("XA COMMIT 'xa-late'", "XA ROLLBACK 'xa-undone'", "XA COMMIT 'xa-early'")
    mariadb.execute("INSERT INTO t VALUES (3, 'after commit')", database=db)
    second_target = tso(mariadb.uri)
    res = run_cli(run_args(*common, "--target-ts", str(second_target), config=config), timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr[-4000:]

    replay_once(sink_uri, downstream.port, progress)
    assert_tables_equal(mariadb, downstream, db)
    rows = table_rows(downstream, db, ["t", "e"])
    assert rows["t"] == [("2", "after prepare"), ("20", "late xa"), ("3", "after commit")], rows
    assert rows["e"] == [("10", "early xa")], rows
