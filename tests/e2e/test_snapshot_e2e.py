"""e2e: initial snapshot + binlog stream under a concurrent write load → CSV files / Kafka → consumer → equal tables.

The upstream holds a 500,000-row table and the mixed workload's tables (every type, a NOT NULL
unique key as the handle, hostile names). While a writer thread keeps inserting, updating (also
keys) and deleting rows all over the key space — including ranges the snapshot has not copied
yet — a changefeed with ``[snapshot] mode = "initial"`` copies the tables by key ranges in Spark
and hands over to the binlog at its start offset. The output is replayed with
``sparkcdc consumer --once`` into a downstream MariaDB, which must then equal the upstream. The
scenario runs twice: into CSV files, and into canal-json (TiDB extension) on a real Kafka-protocol
broker (Tansu), where the snapshot rows must also arrive as INSERT messages at the handover
commit_ts.

A second test kills ``sparkcdc run`` with SIGKILL in the middle of the snapshot and starts it
again: ranges finished before the kill are not read again (their progress records and spooled
files are untouched), unfinished ranges resume after their last chunk, and the result is exact.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.tansu import LocalTansu

from .workload import (
    CliProcess,
    SteadyLoad,
    assert_tables_equal,
    create_tables,
    list_tables,
    replay_once,
    run_workload,
    tso,
    wait_for,
)

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

BIG = "big"
KAFKA_ROWS = 500_000


def _create_big(db: LocalMariaDB, schema: str, rows: int) -> None:
    db.execute(
        f"CREATE TABLE `{schema}`.{BIG} (id INT PRIMARY KEY, grp INT NOT NULL, v VARCHAR(40), "
        "amount DECIMAL(12,2), dt DATETIME(3), b VARBINARY(8), KEY g (grp))",
        f"INSERT INTO `{schema}`.{BIG} SELECT seq, seq % 97, CONCAT('row ', seq), seq / 100, "
        f"'2024-01-01 00:00:00.000' + INTERVAL seq SECOND, UNHEX(HEX(seq)) FROM `{schema}`.seq_1_to_{rows}",
    )


class BigLoad(threading.Thread):
    """Inserts, updates (also of keys) and deletes anywhere in the big table, until stopped."""

    def __init__(self, db: LocalMariaDB, schema: str, rows: int, seed: int = 5, pause: float = 0.003) -> None:
        super().__init__(name="big-load", daemon=True)
        self.db, self.schema, self.rows = db, schema, rows
        self.rnd = random.Random(seed)
        self.pause = pause
        self.ops: dict[str, int] = {"insert": 0, "update": 0, "delete": 0, "move": 0, "txn": 0}
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            conn = self.db.connect(self.schema)
            try:
                with conn.cursor() as cur:
                    k = 0
                    while not self._halt.is_set():
                        k += 1
                        self._one(cur, k)
                        self._halt.wait(self.pause)
            finally:
                conn.close()
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def _one(self, cur: Any, k: int) -> None:
        rnd, n = self.rnd, self.rows
        r = rnd.random()
        anywhere = rnd.randint(1, n)
        if r < 0.3:
            cur.execute(f"UPDATE {BIG} SET v = %s, amount = amount + 1 WHERE id = %s", (f"upd {k}", anywhere))
            self.ops["update"] += 1
        elif r < 0.5:
            cur.execute(f"DELETE FROM {BIG} WHERE id = %s", (anywhere,))
            self.ops["delete"] += 1
        elif r < 0.7:
            cur.execute(
                f"INSERT INTO {BIG} VALUES (%s, %s, %s, %s, NOW(3), %s)",
                (n + k, k % 97, f"new {k}", k / 7, bytes([k % 256])),
            )
            self.ops["insert"] += 1
        elif r < 0.8:
            # Reuse a key that may have been deleted (an insert into a gap of any range).
            cur.execute(
                f"INSERT IGNORE INTO {BIG} VALUES (%s, 1, 'again', 0, NULL, NULL)", (rnd.randint(1, n),)
            )
            self.ops["insert"] += 1
        elif r < 0.9:
            cur.execute(f"UPDATE {BIG} SET id = id + 2000000 WHERE id = %s", (anywhere,))
            self.ops["move"] += 1
        else:
            cur.execute("BEGIN")
            cur.execute(f"DELETE FROM {BIG} WHERE id = %s", (anywhere,))
            cur.execute(f"UPDATE {BIG} SET grp = grp + 1 WHERE id = %s", (rnd.randint(1, n),))
            cur.execute(f"INSERT IGNORE INTO {BIG} VALUES (%s, 2, 'txn', 1, NULL, NULL)", (anywhere,))
            cur.execute("COMMIT")
            self.ops["txn"] += 1

    def stop(self) -> dict[str, int]:
        """Stop, join, re-raise a writer error; return the operation counts."""
        self._halt.set()
        self.join(timeout=60)
        if self.error is not None:
            raise AssertionError(f"the load failed: {self.error!r}") from self.error
        return dict(self.ops)


def _config(path: Path, schema: str, chunk_size: int, csv: bool = True) -> Path:
    path.write_text(
        f'[filter]\nrules = ["{schema}.*"]\n'
        + ("[sink.csv]\ninclude-commit-ts = true\n" if csv else "")
        + f'[snapshot]\nmode = "initial"\nchunk-size = {chunk_size}\n'
    )
    return path


def _create_downstream_tables(up: LocalMariaDB, down: LocalMariaDB, schema: str) -> None:
    """The tables as they are upstream, created empty downstream (like ``mariadb-dump --no-data``).

    A storage schema file cannot describe every column type (ENUM/SET elements), so a table that
    existed before the changefeed is created downstream before the replay.
    """
    statements = [f"DROP DATABASE IF EXISTS `{schema}`", f"CREATE DATABASE `{schema}`"]
    for t in list_tables(up, schema):
        statements.append(f"USE `{schema}`")
        statements.append(str(up.query(f"SHOW CREATE TABLE `{schema}`.`{t}`")[0][1]))
    down.execute(*statements)


def _replay(
    mariadb: LocalMariaDB,
    sink_uri: str,
    config: Path | None,
    downstream: LocalMariaDB,
    schema: str,
    progress: str,
) -> str:
    """``sparkcdc consumer --once`` from the sink's output into empty copies of the upstream tables."""
    downstream.execute(f"DROP DATABASE IF EXISTS `{progress}`")
    _create_downstream_tables(mariadb, downstream, schema)
    return replay_once(sink_uri, downstream.port, progress, config, timeout=600)


@pytest.fixture()
def schema(mariadb: LocalMariaDB, request: pytest.FixtureRequest) -> Iterator[str]:
    name = "snap_" + request.node.name[5:30].lower()
    yield name
    mariadb.execute(f"DROP DATABASE IF EXISTS `{name}`")


@dataclass
class LoadedSnapshot:
    """What one snapshot-under-load run did: the snapshot report, the load and the progress seen."""

    report: dict[str, Any]
    ops: dict[str, int]
    """The big table's load, whole run."""
    during: dict[str, int]
    """The big table's load up to the end of the snapshot."""
    seen: list[Any]
    snapshot_s: float


def _snapshot_under_load(
    spark: Any,
    mariadb: LocalMariaDB,
    schema: str,
    rows: int,
    sink_uri: str,
    config: Path,
    state: Path,
    cid: str,
) -> LoadedSnapshot:
    """The upstream tables, then a changefeed with an initial snapshot started under load, run to the head."""
    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.pipeline.changefeed import Progress, start_changefeed
    from sparkcdc.pipeline.spec import ChangefeedSpec

    create_tables(mariadb, schema)
    run_workload(mariadb, schema, rows=60)
    _create_big(mariadb, schema, rows)
    spec = ChangefeedSpec(
        changefeed_id=cid,
        upstream_uri=mariadb.uri,
        sink_uri=sink_uri,
        config=ReplicaConfig.from_file(config),
        checkpoint_dir=str(state),
        trigger_interval="300 milliseconds",
    )
    seen: list[Progress] = []
    big_load = BigLoad(mariadb, schema, rows)
    steady = SteadyLoad(mariadb, schema, pause=0.01)
    big_load.start()
    steady.start()
    running = None
    try:
        wait_for(lambda: big_load.ops["delete"] > 5, 60, "the load to run")
        t0 = time.monotonic()
        running = start_changefeed(spark, spec, seen.append)  # returns after the snapshot is written
        snapshot_s = time.monotonic() - t0
        during = dict(big_load.ops)
        wait_for(lambda: running.progress().batches >= 3, 120, "the stream to commit batches")
    finally:
        ops = big_load.stop()
        steady.stop()
    try:
        head = tso(mariadb.uri)
        wait_for(lambda: running.progress().checkpoint_ts >= head, 180, "the stream to reach the head")
    finally:
        running.stop()
    report = json.loads((state / "snapshot" / "done.json").read_text())
    print(f"snapshot {snapshot_s:.1f}s, report {report}, load {ops}")
    return LoadedSnapshot(report, ops, during, seen, snapshot_s)


def _assert_overlapped(run: LoadedSnapshot, rows: int) -> None:
    """The load really ran while the snapshot did, the handover corrected the keys it touched, progress showed."""
    report, ops = run.report, run.ops
    assert sum(run.during.values()) > 50 and ops["delete"] > 10 and ops["move"] > 5
    assert report["rows_copied"] >= rows - ops["delete"] and report["touched_keys"] > 20
    assert report["ranges"] >= 8
    # Progress was visible: ranges done/total and rows copied while reading, then done.
    reading = [p for p in run.seen if p.snapshot_phase == "reading"]
    assert reading and any(0 < p.snapshot_rows < report["rows_copied"] for p in reading)
    assert any(
        p.snapshot_phase == "done" and p.snapshot_ranges_done == p.snapshot_ranges_total for p in run.seen
    )


def test_snapshot_and_stream_under_load_equal_upstream(
    spark: Any, mariadb: LocalMariaDB, downstream: LocalMariaDB, schema: str, tmp_path: Path
) -> None:
    rows = 500_000
    config = _config(tmp_path / "cf.toml", schema, 25_000)
    sink_uri = f"file://{tmp_path / 'out'}?protocol=csv"
    run = _snapshot_under_load(spark, mariadb, schema, rows, sink_uri, config, tmp_path / "state", "snap-e2e")
    _assert_overlapped(run, rows)
    out = _replay(mariadb, sink_uri, config, downstream, schema, "progress_snap_e2e")
    assert re.search(r"applied \d+ DDL, [1-9]\d* rows", out), out
    assert_tables_equal(mariadb, downstream, schema)


def _count_messages(bootstrap: str, topic: str, handover_ts: int) -> Counter[tuple[str, str, bool]]:
    """(table, type, commitTs == handover) of every canal-json message of the topic (watermarks: table "")."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "count-" + uuid.uuid4().hex[:8],
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    counts: Counter[tuple[str, str, bool]] = Counter()
    try:
        partitions = list(c.list_topics(topic, timeout=10).topics[topic].partitions)
        c.assign([TopicPartition(topic, p, 0) for p in partitions])
        at_end: set[int] = set()
        deadline = time.monotonic() + 300
        while len(at_end) < len(partitions):
            assert time.monotonic() < deadline, f"partitions {sorted(set(partitions) - at_end)} never ended"
            for m in c.consume(num_messages=5000, timeout=0.5):
                err, part = m.error(), int(m.partition() or 0)
                if err is not None:
                    assert err.code() == KafkaError._PARTITION_EOF, err
                    at_end.add(part)
                    continue
                at_end.discard(part)
                d = json.loads(m.value() or b"{}")
                ts = int(d.get("_tidb", {}).get("commitTs", 0))
                counts[(d.get("table") or "", d.get("type") or "", ts == handover_ts)] += 1
    finally:
        c.close()
    return counts


def _close_producers(spark: Any) -> None:
    """Drop the cached Kafka producers of the driver and of Spark's reused Python workers.

    The session's Spark outlives this module's broker; a worker's producer would keep dialling it.
    Best effort for the workers: a task per slot, twice over, reaches each idle worker in practice.
    """
    from sparkcdc.sink.kafka.producer import close_all_producers

    close_all_producers(10)
    n = 2 * int(spark.sparkContext.defaultParallelism)
    spark.sparkContext.parallelize(range(n), n).foreach(
        lambda _: __import__("sparkcdc.sink.kafka.producer", fromlist=["_"]).close_all_producers(1)
    )


def test_kafka_snapshot_and_stream_under_load_equal_upstream(
    spark: Any,
    mariadb: LocalMariaDB,
    downstream: LocalMariaDB,
    tansu: LocalTansu,
    schema: str,
    tmp_path: Path,
) -> None:
    """The Kafka half: the same scenario into canal-json on a real broker, replayed by ``sparkcdc consumer``."""
    rows = KAFKA_ROWS
    config = _config(tmp_path / "cf.toml", schema, 25_000, csv=False)
    topic = "snap-" + uuid.uuid4().hex[:10]
    sink_uri = tansu.sink_uri(topic, "protocol=canal-json&enable-tidb-extension=true")
    try:
        run = _snapshot_under_load(
            spark, mariadb, schema, rows, sink_uri, config, tmp_path / "state", "snap-kafka-e2e"
        )
    finally:
        _close_producers(spark)
    _assert_overlapped(run, rows)
    handover_ts = int(run.report["handover"]["ts"])
    counts = _count_messages(tansu.bootstrap, topic, handover_ts)
    print(f"messages: {dict(sorted(counts.items()))}")
    # The snapshot rows arrived as INSERT messages at the handover commit_ts, and only as those.
    snapshot_inserts = sum(n for (_, kind, at), n in counts.items() if at and kind == "INSERT")
    assert snapshot_inserts >= run.report["rows_written"] > 0
    assert not [k for k, n in counts.items() if k[2] and k[1] not in ("INSERT", "TIDB_WATERMARK")]
    # Every row the big table held at the handover: at least the rows before the load minus its deletes.
    assert counts[(BIG, "INSERT", True)] >= rows - run.ops["delete"]
    # ... and the stream after the handover carried the load's changes of every kind.
    assert all(counts[(BIG, kind, False)] > 0 for kind in ("INSERT", "UPDATE", "DELETE"))
    out = _replay(mariadb, sink_uri, None, downstream, schema, "progress_snap_kafka")
    m = re.search(r"applied (\d+) DDL and (\d+) rows", out)
    assert m and int(m.group(2)) >= run.report["rows_written"], out
    assert_tables_equal(mariadb, downstream, schema)


def _ranges(state: Path) -> dict[int, dict[str, Any]]:
    out = {}
    for p in (state / "snapshot" / "ranges").glob("*.json"):
        try:
            d = json.loads(p.read_text())
        except ValueError:
            continue  # being replaced right now
        out[int(d["range_id"])] = d
    return out


def _settled_ranges(state: Path) -> dict[int, dict[str, Any]]:
    last: list[dict[int, dict[str, Any]]] = [_ranges(state)]

    def settled() -> bool:
        now = _ranges(state)
        same = now == last[0]
        last[0] = now
        return same

    from sparkcdc.services.common import wait_until

    wait_until(settled, timeout=60, what="range records to settle after the kill", interval=2.0)
    return last[0]


def test_kill9_mid_snapshot_resumes_ranges_and_stays_exact(
    mariadb: LocalMariaDB, downstream: LocalMariaDB, schema: str, tmp_path: Path
) -> None:
    rows = 150_000
    mariadb.execute(f"DROP DATABASE IF EXISTS `{schema}`", f"CREATE DATABASE `{schema}`")
    _create_big(mariadb, schema, rows)
    config = _config(tmp_path / "cf.toml", schema, 2_000)
    sink_uri = f"file://{tmp_path / 'out'}?protocol=csv"
    cid = "snap-kill"
    state = tmp_path / "data" / cid
    args = [
        "run",
        "--upstream-uri",
        mariadb.uri,
        "--sink-uri",
        sink_uri,
        "--config",
        str(config),
        "-c",
        cid,
        "--data-dir",
        str(tmp_path / "data"),
        "--master",
        "local[2]",
        "--no-progress",
    ]
    load = BigLoad(mariadb, schema, rows, seed=9, pause=0.01)
    load.start()
    try:
        run1 = CliProcess(args, tmp_path / "run1.log")
        try:
            wait_for(
                lambda: (
                    sum(d["stage"] == "done" for d in _ranges(state).values()) >= 1
                    or run1.proc.poll() is not None
                ),
                240,
                "a range to finish",
            )
            assert run1.proc.poll() is None, run1.output()[-4000:]
            at_kill = _ranges(state)
            run1.kill_tree()  # a crash of the machine
        finally:
            run1.stop()
        # Spark's Python workers run in their own process group and die once their daemon sees the JVM
        # gone; wait until no late task changes a range record any more.
        before = _settled_ranges(state)
        done_before = {i: d for i, d in before.items() if d["stage"] == "done"}
        partial = {i: d for i, d in before.items() if d["stage"] == "snapshot" and d["rows_copied"] > 0}
        assert done_before and len(done_before) < len(before), (
            "killed before or after the whole snapshot: "
            f"{sum(d['stage'] == 'done' for d in at_kill.values())} of {len(at_kill)} ranges done at the kill, "
            f"{len(done_before)} of {len(before)} once settled"
        )
        assert not (state / "snapshot" / "done.json").exists()
        run2 = CliProcess(args, tmp_path / "run2.log")
        try:
            run2.wait_for("started; data dir", 300, "the second run to finish the snapshot")
            after = _ranges(state)
        finally:
            ops = load.stop()
        head = tso(mariadb.uri)
        wait_for(
            lambda: (
                json.loads((state / "checkpoint.json").read_text())["checkpoint_ts"] >= head
                if (state / "checkpoint.json").exists()
                else False
            ),
            180,
            "the stream to reach the head",
        )
    finally:
        if load.is_alive():
            load.stop()
    os.kill(run2.pid, signal.SIGINT)  # a clean stop (Ctrl-C) writes the storage checkpoint
    run2.wait(120)
    # Finished ranges were not read again: same record (one attempt) and the same spooled files.
    for i, d in done_before.items():
        assert after[i]["attempts"] == 1 and after[i]["files"] == d["files"], f"range {i} was read again"
        assert after[i]["finished_at"] == d["finished_at"]
    # Partly copied ranges resumed after their last chunk: their earlier chunks were kept.
    for i, d in partial.items():
        assert after[i]["attempts"] == 2 and after[i]["files"][: len(d["files"])] == d["files"]
        assert after[i]["rows_copied"] >= d["rows_copied"]
    report = json.loads((state / "snapshot" / "done.json").read_text())
    assert report["touched_keys"] > 0 and sum(ops.values()) > 50
    out = _replay(mariadb, sink_uri, config, downstream, schema, "progress_snap_kill")
    assert re.search(r"applied \d+ DDL, [1-9]\d* rows", out), out
    assert_tables_equal(mariadb, downstream, schema)
