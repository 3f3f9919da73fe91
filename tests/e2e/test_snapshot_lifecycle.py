"""e2e: an initial snapshot under ``sparkcdc server`` survives a crash, pauses, resumes and a failover.

A changefeed with ``[snapshot] mode = "initial"`` copies a 20,000-row table (and a small key-less
table) into CSV files. The key-less table is held by ``LOCK TABLES ... WRITE`` from the test, so
its one range cannot be read while the big table's ranges finish. Then the server is killed with
SIGKILL (a crash) and started again: the new claim continues the snapshot, and the big table's
finished ranges are not read again (their records in the meta database keep the first run's
epoch and a single attempt). Once the snapshot is in the sink the changefeed is paused and resumed
twice, then a second server takes over after the first stops. The CSV files hold every snapshot
row exactly once, and ``sparkcdc consumer`` replays them into a downstream MariaDB equal to the
upstream.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.meta import MetaStore
from sparkcdc.pipeline.snapshot.plan import STAGE_DONE, RangeState, range_states
from sparkcdc.services.common import wait_until
from sparkcdc.services.mariadb import LocalMariaDB
from tests.e2e.workload import assert_tables_equal, list_tables, replay_once
from tests.integration.server.conftest import ServerProc, status_of

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

SCHEMA = "snap_lifecycle"
CF = "snap-lc"
ROWS = 20_000
GATE_ROWS = 10
LEASE = 4


@pytest.fixture()
def upstream(mariadb: LocalMariaDB) -> Iterator[LocalMariaDB]:
    mariadb.execute(
        f"DROP DATABASE IF EXISTS {SCHEMA}",
        f"CREATE DATABASE {SCHEMA}",
        f"CREATE TABLE {SCHEMA}.t (id INT PRIMARY KEY, v VARCHAR(40), n INT)",
        f"INSERT INTO {SCHEMA}.t SELECT seq, CONCAT('row ', seq), seq % 97 FROM {SCHEMA}.seq_1_to_{ROWS}",
        # no key: one range, read in one consistent read (the gate the test holds)
        f"CREATE TABLE {SCHEMA}.zz_gate (v INT)",
        f"INSERT INTO {SCHEMA}.zz_gate SELECT seq FROM {SCHEMA}.seq_1_to_{GATE_ROWS}",
    )
    yield mariadb
    mariadb.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")


def _csv_rows(root: Path) -> list[list[str]]:
    out = []
    for f in sorted((root / SCHEMA).rglob("CDC*.csv")):
        out.extend(r for r in csv.reader(io.StringIO(f.read_text(), newline="")) if r)
    return out


def _ids(root: Path) -> Counter[int]:
    """How often each id of ``t`` was written as an insert (op, table, schema, commit-ts, id, ...)."""
    return Counter(int(r[4]) for r in _csv_rows(root) if r[0] == "I" and r[1] == "t")


def _ranges(meta: str) -> list[RangeState]:
    store = MetaStore.open(meta)
    try:
        return range_states(store.get_range_progress(CF))
    finally:
        store.close()


def _insert_and_see(up: LocalMariaDB, root: Path, first: int, n: int, servers: dict[str, ServerProc]) -> None:
    """Insert ids ``first..first+n-1`` upstream and wait until the CSV files hold them."""
    up.execute(
        f"INSERT INTO {SCHEMA}.t SELECT seq, CONCAT('new ', seq), 0 FROM {SCHEMA}.seq_{first}_to_{first + n - 1}"
    )
    wait_until(
        lambda: all(_ids(root)[i] >= 1 for i in range(first, first + n)),
        timeout=120,
        interval=0.5,
        what=f"ids {first}..{first + n - 1} in the sink",
        on_timeout=lambda: _logs(servers),
    )


def _logs(servers: dict[str, ServerProc]) -> str:
    return "\n".join(f"--- {n}\n{s.log()[-4000:]}" for n, s in servers.items())


def _owner(server: ServerProc) -> str | None:
    st = status_of(server, CF)
    return st["owner"] if st["state"] == "normal" and st["owner"] else None


def test_initial_snapshot_is_copied_once_across_crash_pauses_and_failover(
    upstream: LocalMariaDB, downstream: LocalMariaDB, tmp_path: Path
) -> None:
    meta = f"sqlite:///{tmp_path / 'meta.db'}"
    data = tmp_path / "data"  # shared by both servers, as a mount on every host would be
    out = tmp_path / "out"
    servers: dict[str, ServerProc] = {}
    servers["a"] = ServerProc(meta, tmp_path, lease=LEASE, name="a", data_dir=data).start()
    gate = upstream.connect()
    try:
        with gate.cursor() as cur:
            cur.execute(f"LOCK TABLES {SCHEMA}.zz_gate WRITE")
        with servers["a"].client() as c:
            c.create_changefeed(
                {
                    "changefeed_id": CF,
                    "upstream_uri": upstream.uri,
                    "sink_uri": f"file://{out}?protocol=csv",
                    "replica_config": {
                        "filter": {"rules": [f"{SCHEMA}.*"]},
                        "snapshot": {"mode": "initial", "chunk-size": 1000},
                        "sink": {"csv": {"include-commit-ts": True}},
                    },
                }
            )
        # 1. The big table's ranges finish; the gate's range waits for the lock.
        first = wait_until(
            lambda: (
                (rs := _ranges(meta))
                and all(r.stage == STAGE_DONE for r in rs if r.table == "t")
                and any(r.table == "zz_gate" for r in rs)
                and rs
            ),
            timeout=300,
            interval=0.5,
            what="the big table's ranges to finish",
            on_timeout=lambda: _logs(servers),
        )
        big = {r.range_id: r for r in first if r.table == "t"}
        assert len(big) > 1 and sum(r.rows_copied for r in big.values()) == ROWS
        assert not _ids(out), "snapshot rows reached the sink before the snapshot finished"
        # 2. A crash of the server, and a restart: the new claim continues the snapshot.
        servers["a"].kill_tree()
        servers["a"] = ServerProc(meta, tmp_path, lease=LEASE, name="a", data_dir=data).start()
    finally:
        with gate.cursor() as cur:
            cur.execute("UNLOCK TABLES")
        gate.close()
    try:
        wait_until(
            lambda: sum(_ids(out).values()) >= ROWS,
            timeout=300,
            interval=0.5,
            what="the snapshot in the sink",
            on_timeout=lambda: _logs(servers),
        )
        after = {r.range_id: r for r in _ranges(meta)}
        for rid, r in big.items():
            a = after[rid]
            assert (a.epoch, a.attempts, a.files) == (r.epoch, 1, r.files), f"range {rid} was read again"
        gate_range = next(r for r in after.values() if r.table == "zz_gate")
        assert gate_range.stage == STAGE_DONE and gate_range.epoch > max(r.epoch for r in big.values())
        next_id = ROWS + 1
        _insert_and_see(upstream, out, next_id, 5, servers)
        next_id += 5
        # 3. Pause and resume, twice: the stream continues, the snapshot is not copied again.
        for _ in range(2):
            with servers["a"].client() as c:
                c.pause(CF)
            wait_until(
                lambda: (
                    status_of(servers["a"], CF)["state"] == "stopped"
                    and not status_of(servers["a"], CF)["owner"]
                ),
                timeout=120,
                what="the pause",
                on_timeout=lambda: _logs(servers),
            )
            with servers["a"].client() as c:
                c.resume(CF)
            wait_until(
                lambda: _owner(servers["a"]),
                timeout=60,
                what="a claim after resume",
                on_timeout=lambda: _logs(servers),
            )
            _insert_and_see(upstream, out, next_id, 5, servers)
            next_id += 5
        # 4. Failover: a second server takes over once the first stops.
        servers["b"] = ServerProc(meta, tmp_path, lease=LEASE, name="b", data_dir=data).start()
        with servers["b"].client() as c:
            b_id = c.status()["id"]
        assert servers["a"].stop() == 0, servers["a"].log()[-3000:]
        wait_until(
            lambda: _owner(servers["b"]) == b_id,
            timeout=LEASE * 15,
            interval=0.5,
            what="the second server to take over",
            on_timeout=lambda: _logs(servers),
        )
        _insert_and_see(upstream, out, next_id, 5, servers)
        next_id += 5
    finally:
        for s in servers.values():
            s.stop()
    # Every row of t exactly once in the CSV files, the gate's rows once each.
    ids = _ids(out)
    assert sorted(ids) == list(range(1, next_id)), "ids missing from the sink"
    twice = {i: n for i, n in ids.items() if n != 1}
    assert not twice, f"{len(twice)} ids written more than once (first: {sorted(twice.items())[:5]})"
    gate_rows = Counter(r[4] for r in _csv_rows(out) if r[1] == "zz_gate")
    assert gate_rows == Counter({str(i): 1 for i in range(1, GATE_ROWS + 1)})
    # The consumer replays the files into a downstream equal to the upstream.
    statements = [f"DROP DATABASE IF EXISTS {SCHEMA}", f"CREATE DATABASE {SCHEMA}", f"USE {SCHEMA}"]
    for t in list_tables(upstream, SCHEMA):
        statements.append(str(upstream.query(f"SHOW CREATE TABLE {SCHEMA}.`{t}`")[0][1]))
    downstream.execute(*statements)
    downstream.execute("DROP DATABASE IF EXISTS snap_lc_progress")
    replay_once(f"file://{out}?protocol=csv", downstream.port, "snap_lc_progress", _consumer_config(tmp_path))
    assert_tables_equal(upstream, downstream, SCHEMA)


def _consumer_config(tmp_path: Path) -> Any:
    path = tmp_path / "consumer.toml"
    path.write_text("[sink.csv]\ninclude-commit-ts = true\n")
    return path
