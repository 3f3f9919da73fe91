"""e2e: the checkpoint of an idle changefeed follows the upstream clock.

`sparkcdc run` to a file:// CSV sink (with commit-ts): after a few rows the upstream goes
quiet, and the changefeed's checkpoint (``checkpoint.json``, what the server reports), the
sink's ``metadata`` and `cli tso query`'s ts all meet; an open transaction holds the
checkpoint back until it commits and its row comes above it; an idle changefeed runs no Spark
batch (the driver raises its chain state: ``pipeline/marks.py``); a kill -9 while idle and a
restart from an earlier Spark checkpoint give every row the commit_ts it had before. The
last test checks the canal-json ``TIDB_WATERMARK`` of an idle Kafka changefeed.
"""

from __future__ import annotations

import csv
import io
import json
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.capture.offset import Offset
from sparkcdc.model.ts import physical_ms
from sparkcdc.pipeline.marks import read_marks
from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.tansu import LocalTansu
from sparkcdc.sink.storage.sink import METADATA_MIN_INTERVAL

from .workload import CliProcess, run_args, tso, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

MAX_LAG_S = 2.0
"""How far the changefeed's checkpoint of an idle upstream may trail the clock."""


class Changefeed:
    """Paths and readers of one `sparkcdc run` changefeed to a CSV storage sink."""

    def __init__(self, mariadb: LocalMariaDB, tmp_path: Path, name: str, schema: str) -> None:
        self.name = name
        self.schema = schema
        self.sink = tmp_path / "sink"
        self.data_dir = tmp_path / "data"
        config = tmp_path / "cf.toml"
        config.write_text(f'[filter]\nrules = ["{schema}.*"]\n[sink.csv]\ninclude-commit-ts = true\n')
        self.args = run_args(
            mariadb.uri, f"file://{self.sink}?protocol=csv", name, self.data_dir, config=config
        )
        self.logs = tmp_path

    def start(self, run: str) -> CliProcess:
        """Start `sparkcdc run` and wait until its query runs."""
        proc = CliProcess(self.args, self.logs / f"{run}.log")
        proc.wait_started(timeout=240)
        return proc

    def checkpoint(self) -> int:
        """The changefeed's checkpoint (``checkpoint.json``, written after every committed batch)."""
        try:
            return int(
                json.loads((self.data_dir / self.name / "checkpoint.json").read_text())["checkpoint_ts"]
            )
        except (OSError, ValueError, KeyError):
            return 0

    def metadata(self) -> int:
        """The storage sink's ``metadata`` checkpoint-ts."""
        try:
            return int(json.loads((self.sink / "metadata").read_bytes())["checkpoint-ts"])
        except (OSError, ValueError, KeyError):
            return 0

    def commit_ts_by_id(self) -> dict[int, list[int]]:
        """Every CSV record's commit_ts by the row's id (several when a batch was written again)."""
        out: dict[int, list[int]] = defaultdict(list)
        for f in sorted(self.sink.rglob("CDC*.csv")):
            for r in csv.reader(io.StringIO(f.read_bytes().decode("utf-8"), newline="")):
                out[int(r[4])].append(int(r[3]))
        return out

    def spark_batches(self, log: str) -> dict[int, str]:
        """Spark's offset or commit log of the query: batch id → the file's text."""
        folder = self.data_dir / self.name / "spark" / log
        return {int(p.name): p.read_text() for p in folder.iterdir() if p.name.isdigit()}


def _fresh_schemas(mariadb: LocalMariaDB, *schemas: str) -> None:
    """Each schema created anew with one table ``t (id, v)``."""
    for schema in schemas:
        mariadb.execute(
            f"DROP DATABASE IF EXISTS {schema}",
            f"CREATE DATABASE {schema}",
            f"CREATE TABLE {schema}.t (id INT PRIMARY KEY, v VARCHAR(20))",
        )


def _lag_s(ts: int) -> float:
    return time.time() - physical_ms(ts) / 1000


def _sample(seconds: float, *probes: Any) -> Iterator[tuple[float, ...]]:
    """(time, probe values...) every 0.2 s for ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        yield (time.time(), *(p() for p in probes))
        time.sleep(0.2)  # the sampling period of the observation, not a readiness wait


def _insert_old_header(mariadb: LocalMariaDB, schema: str, row_id: int) -> None:
    """An INSERT whose binlog header second is a minute old (as a lagging replica's applier writes)."""
    conn = mariadb.connect(schema)
    try:
        with conn.cursor() as cur:
            cur.execute("SET timestamp = UNIX_TIMESTAMP() - 60")
            cur.execute(f"INSERT INTO t VALUES ({row_id}, 'old header')")
    finally:
        conn.close()


def test_an_idle_changefeed_checkpoint_follows_the_clock_and_an_open_transaction_holds_it(
    mariadb: LocalMariaDB, tmp_path: Path
) -> None:
    schema = "e2e_idle"
    _fresh_schemas(mariadb, schema)
    cf = Changefeed(mariadb, tmp_path, "e2e-idle", schema)
    proc = cf.start("run")
    try:
        # Three rows, then `cli tso query`: the checkpoint and the sink's metadata reach that ts.
        for i in (1, 2, 3):
            mariadb.execute(f"INSERT INTO {schema}.t VALUES ({i}, 'row')")
        ts = tso(mariadb.uri)
        wait_for(lambda: cf.checkpoint() >= ts and cf.metadata() >= ts, 60, "the checkpoint to reach the tso")
        rows = cf.commit_ts_by_id()
        assert sorted(rows) == [1, 2, 3] and all(c <= ts for cs in rows.values() for c in cs)

        wait_for(
            lambda: (
                _lag_s(cf.checkpoint()) < MAX_LAG_S
                and _lag_s(cf.metadata()) < MAX_LAG_S + METADATA_MIN_INTERVAL
            ),
            15,
            "the checkpoint to catch up with the clock",
        )
        # Idle for 10 s: the checkpoint trails the clock by at most MAX_LAG_S; metadata is written
        # at most every METADATA_MIN_INTERVAL, so it may trail by that much more.
        samples = list(_sample(10, cf.checkpoint, cf.metadata))
        cp_lags = [t - physical_ms(cp) / 1000 for t, cp, _md in samples]
        md_lags = [t - physical_ms(md) / 1000 for t, _cp, md in samples]
        print(
            f"idle: checkpoint lag {min(cp_lags):.2f}-{max(cp_lags):.2f}s, "
            f"metadata lag {min(md_lags):.2f}-{max(md_lags):.2f}s"
        )
        series = [
            (round(t % 100, 1), round(c, 2), round(m, 2))
            for (t, *_), c, m in zip(samples, cp_lags, md_lags, strict=True)
        ]
        # A storage sink is marked as often as it writes ``metadata`` (every METADATA_MIN_INTERVAL
        # upstream seconds: SinkCapabilities.resolved_every_s), so its checkpoint trails the clock
        # by up to that interval less a second more than one marked every upstream second.
        cp_bound = MAX_LAG_S + METADATA_MIN_INTERVAL - 1
        assert max(cp_lags) <= cp_bound, f"checkpoint lags by up to {max(cp_lags):.2f}s: {series}"
        # ``metadata`` is written at a batch's commit once METADATA_MIN_INTERVAL has passed, on the
        # local clock or in checkpoint ts, since the last file: so between two files there are at
        # most that interval plus the gap between two commits (the checkpoint's own lag bounds
        # that gap), and a file's ts is then at most one checkpoint lag old.
        md_bound = MAX_LAG_S + METADATA_MIN_INTERVAL + MAX_LAG_S + 0.5
        assert max(md_lags) <= md_bound, f"metadata lags by up to {max(md_lags):.2f}s: {series}"
        for column in (1, 2):
            values = [s[column] for s in samples]
            assert values == sorted(values), "a checkpoint went backwards"
            assert physical_ms(values[-1]) - physical_ms(values[0]) >= 7000, "it did not follow the clock"

        # A transaction open for 5 s: the checkpoint stays before the second it started in.
        conn = mariadb.connect(schema)
        try:
            with conn.cursor() as cur:
                opened_s = int(time.time())
                cur.execute("BEGIN")
                cur.execute("INSERT INTO t VALUES (100, 'long txn')")
                held = list(_sample(5, cf.checkpoint, cf.metadata))
                published = max(max(cp, md) for _t, cp, md in held)
                assert physical_ms(published) < opened_s * 1000, "the checkpoint passed an open transaction"
                assert held[-1][0] - physical_ms(held[-1][1]) / 1000 > 4, "the checkpoint was not held back"
                cur.execute("COMMIT")
                committed_s = time.time()
        finally:
            conn.close()
        [long_ts] = wait_for(lambda: cf.commit_ts_by_id().get(100), 30, "the long transaction's row")
        assert long_ts > published, "its row came at or below a checkpoint already published"
        wait_for(
            lambda: physical_ms(cf.checkpoint()) / 1000 > committed_s + 1, 15, "the checkpoint to move on"
        )
    finally:
        proc.stop()
    assert cf.metadata() >= cf.checkpoint(), "stopping did not publish the last checkpoint"
    mariadb.execute(f"DROP DATABASE IF EXISTS {schema}")


def test_kill9_while_idle_then_restart_gives_identical_values(mariadb: LocalMariaDB, tmp_path: Path) -> None:
    schema = "e2e_idle_kill"
    _fresh_schemas(mariadb, schema)
    cf = Changefeed(mariadb, tmp_path, "e2e-idle-kill", schema)
    run1 = cf.start("run1")
    try:
        for i in (1, 2, 3):
            mariadb.execute(f"INSERT INTO {schema}.t VALUES ({i}, 'row')")
        ts = tso(mariadb.uri)
        wait_for(
            lambda: cf.checkpoint() >= ts and _lag_s(cf.checkpoint()) < MAX_LAG_S, 60, "an idle checkpoint"
        )
        # A row with a minute-old binlog header, after the idle checkpoint moved past its second.
        before_4 = max(cf.checkpoint(), cf.metadata())
        _insert_old_header(mariadb, schema, 4)
        [ts4] = wait_for(lambda: cf.commit_ts_by_id().get(4), 30, "row 4")
        assert ts4 > before_4, "a row came at or below a checkpoint already published"
        # Idle again for a while, then kill -9.
        wait_for(lambda: physical_ms(cf.checkpoint()) > physical_ms(ts4) + 2000, 30, "idle marks after row 4")
    finally:
        run1.kill9()
    killed = {"checkpoint": cf.checkpoint(), "metadata": cf.metadata()}
    first_run = cf.commit_ts_by_id()
    offsets = cf.spark_batches("offsets")
    ends = {b: json.loads(text.splitlines()[2]) for b, text in offsets.items()}
    batch4 = min(b for b, end in ends.items() if end.get("segments", 0) > 0 and int(end["ts"]) >= ts4)
    # While idle no batch ran: the driver raised the chain state beside Spark's log instead.
    assert max(ends) == batch4, f"batches after row 4's: {sorted(ends)[batch4:]}"
    assert all(end.get("segments", 0) > 0 for end in ends.values()), "a batch without transactions ran"
    marks = read_marks(str(cf.data_dir / cf.name / "spark"))
    start4 = marks.raise_start(Offset.from_json(ends[batch4 - 1]))
    assert ts4 == start4.ts + 1, "row 4's commit_ts did not come from the raised chain state"
    resolved_at_kill = marks.raise_start(Offset.from_json(ends[batch4])).ts
    assert resolved_at_kill >= killed["checkpoint"] > ts4

    # The restart runs row 4's batch again, as if the crash came after its sink commit and before
    # Spark's commit log (where kill -9 lands when it hits a batch): from the chain state raised
    # at its start, so row 4 gets the commit_ts it had.
    (cf.data_dir / cf.name / "spark" / "commits" / str(batch4)).unlink()

    # While it is down: another old-header row and an ordinary one.
    _insert_old_header(mariadb, schema, 5)
    mariadb.execute(f"INSERT INTO {schema}.t VALUES (6, 'row')")
    run2 = cf.start("run2")
    try:
        seen = []
        for _ in range(300):
            seen.append((cf.checkpoint(), cf.metadata()))
            got = cf.commit_ts_by_id()
            if 5 in got and 6 in got and cf.checkpoint() > max(got[6]):
                break
            time.sleep(0.2)  # the sampling period of the observation, bounded by the loop
        else:
            raise AssertionError(f"rows 5 and 6 did not arrive:\n{run2.output()[-3000:]}")
    finally:
        run2.stop()

    rows = cf.commit_ts_by_id()
    assert sorted(rows) == [1, 2, 3, 4, 5, 6]
    for row_id, stamps in rows.items():
        assert len(set(stamps)) == 1, f"row {row_id} was written with different commit_ts {stamps}"
        if row_id in first_run:
            assert set(first_run[row_id]) == set(stamps)
    order = [rows[i][0] for i in range(1, 7)]
    assert order == sorted(order) and len(set(order)) == 6, f"commit_ts not strictly increasing: {order}"
    # The batch run again kept its logged end, and its chain state orders the row written meanwhile.
    again = cf.spark_batches("offsets")
    assert all(again[b] == text for b, text in offsets.items())
    assert rows[5][0] == resolved_at_kill + 1
    assert rows[5][0] > max(killed.values()), "a row came at or below a checkpoint already published"
    assert min(cp for cp, _md in seen) >= killed["checkpoint"], "the checkpoint went backwards"
    assert min(md for _cp, md in seen) >= killed["metadata"], "the restart published an older checkpoint"
    mariadb.execute(f"DROP DATABASE IF EXISTS {schema}")


def test_writes_to_other_tables_run_no_batch_and_the_checkpoint_follows_the_clock_through_them(
    mariadb: LocalMariaDB, tmp_path: Path
) -> None:
    """A changefeed of one schema while another is written five times a second: its planner
    leaves those transactions to a later batch (a quiet span, ``Planner._quiet_span``), no Spark
    batch runs for them, and the driver raises the checkpoint through them to the clock reading
    the planner took before each scan. A captured row after them comes above every published
    checkpoint (``tests/integration/capture/test_quiet_spans.py`` replays such a batch in a new
    planner: the row keeps its commit_ts)."""
    schema, other = "e2e_span", "e2e_span_other"
    _fresh_schemas(mariadb, schema, other)
    cf = Changefeed(mariadb, tmp_path, "e2e-span", schema)
    proc = cf.start("run")
    try:
        mariadb.execute(f"INSERT INTO {schema}.t VALUES (1, 'row')")
        wait_for(lambda: 1 in cf.commit_ts_by_id(), 60, "row 1")
        wait_for(lambda: _lag_s(cf.checkpoint()) < MAX_LAG_S, 15, "the checkpoint to catch up with the clock")
        batches = len(cf.spark_batches("offsets"))
        # 8 s of writes to the other schema, 5 a second (each moves the binlog head).
        lags: list[float] = []
        stamps: list[int] = []
        for i, (t, cp) in enumerate(_sample(8, cf.checkpoint)):
            mariadb.execute(f"INSERT INTO {other}.t VALUES ({i}, 'other')")
            lags.append(t - physical_ms(cp) / 1000)
            stamps.append(cp)
        assert len(lags) >= 30 and stamps == sorted(stamps), "a checkpoint went backwards"
        print(f"other schema written: checkpoint lag {min(lags):.2f}-{max(lags):.2f}s")
        # the planner's reading is up to a second old when the driver marks from it, and the
        # planner runs at the query's trigger (0.2-2.2 s on a quiet machine; room for a busy one)
        assert max(lags) <= MAX_LAG_S + 2.0, f"checkpoint lags by up to {max(lags):.2f}s: {lags}"
        assert physical_ms(stamps[-1]) - physical_ms(stamps[0]) >= 5000, "it did not follow the clock"
        assert len(cf.spark_batches("offsets")) == batches, "a Spark batch ran for the other schema's rows"
        # A captured row with a minute-old header after the span: above every published checkpoint.
        published = max(cf.checkpoint(), cf.metadata())
        _insert_old_header(mariadb, schema, 2)
        [ts2] = wait_for(lambda: cf.commit_ts_by_id().get(2), 30, "row 2")
        assert ts2 > published, "a row came at or below a checkpoint already published"
    finally:
        proc.stop()
    mariadb.execute(f"DROP DATABASE IF EXISTS {schema}", f"DROP DATABASE IF EXISTS {other}")


def test_an_idle_kafka_changefeed_sends_watermarks_that_follow_the_clock(
    mariadb: LocalMariaDB, tansu: LocalTansu, tmp_path: Path
) -> None:
    from confluent_kafka import Consumer, TopicPartition

    from sparkcdc.codec.canal_json import decode_canal_json

    schema = "e2e_idle_kafka"
    _fresh_schemas(mariadb, schema)
    topic = "idle-" + uuid.uuid4().hex[:8]
    config = tmp_path / "cf.toml"
    config.write_text(f'[filter]\nrules = ["{schema}.*"]\n')
    args = run_args(
        mariadb.uri,
        tansu.sink_uri(topic, "protocol=canal-json&enable-tidb-extension=true&partition-num=1"),
        "e2e-idle-kafka",
        tmp_path / "data",
        config=config,
    )
    proc = CliProcess(args, tmp_path / "run.log")
    consumer = Consumer(
        {
            "bootstrap.servers": tansu.bootstrap,
            "group.id": "idle-" + uuid.uuid4().hex[:8],
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        proc.wait_started(timeout=240)
        mariadb.execute(f"INSERT INTO {schema}.t VALUES (1, 'row')")
        consumer.assign([TopicPartition(topic, 0, 0)])
        rows: list[int] = []
        watermarks: list[tuple[float, int]] = []  # (received at, watermarkTs)
        caught_up_at: float | None = None  # when the first watermark at or above the row arrived
        deadline = time.monotonic() + 120
        # From the row's watermark on, 5 s of watermarks that follow the clock.
        while caught_up_at is None or physical_ms(watermarks[-1][1]) / 1000 < caught_up_at + 5:
            assert time.monotonic() < deadline, (
                f"watermarks stopped at {watermarks[-3:]}:\n{proc.output()[-3000:]}"
            )
            m = consumer.poll(0.5)
            if m is None or m.error() is not None:
                continue
            msg = decode_canal_json(m.value())
            if msg.kind == "watermark":
                assert msg.watermark_ts is not None
                watermarks.append((time.time(), msg.watermark_ts))
                if caught_up_at is None and rows and msg.watermark_ts >= rows[0]:
                    caught_up_at = time.time()
            elif msg.kind == "dml":
                assert msg.commit_ts is not None
                rows.append(msg.commit_ts)
    finally:
        consumer.close()
        proc.stop()
    assert len(rows) == 1 and rows[0] > 0
    assert [w for _t, w in watermarks] == sorted(w for _t, w in watermarks)
    following = [(t, w) for t, w in watermarks if caught_up_at is not None and t > caught_up_at]
    assert len(following) >= 3, f"only {len(following)} watermarks in 5 s of an idle changefeed"
    lags = [t - physical_ms(w) / 1000 for t, w in following]
    print(f"idle kafka: {len(following)} watermarks, lag at arrival {min(lags):.2f}-{max(lags):.2f}s")
    assert max(lags) <= MAX_LAG_S, f"a watermark trailed the clock by {max(lags):.2f}s"
    mariadb.execute(f"DROP DATABASE IF EXISTS {schema}")
