"""The snapshot job on Spark against a real MariaDB: the rows handed to the sink are the state at S.

Changes are made after the handover point S at chosen moments (before the plan, between the plan
and the reads), so the expected result is known exactly: the tables as they were at S.
"""

from __future__ import annotations

import os
import pickle
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.capture import snapshot as cs
from sparkcdc.capture.start import head_offset
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.pipeline.changefeed import bootstrap_history
from sparkcdc.pipeline.snapshot import (
    STAGE_DONE,
    STAGE_SPLIT,
    FileRangeStore,
    InitialSnapshot,
    MetaRangeStore,
    SnapshotOptions,
)
from sparkcdc.services.mariadb import LocalMariaDB

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from sparkcdc.pipeline.spark import get_spark

    yield get_spark("local[2]")


def _state(db: LocalMariaDB, schema: str, tables: list[str]) -> dict[str, Counter[str]]:
    """Every row of the tables as key tokens of the converted values (a multiset per table)."""
    from sparkcdc.capture.catalog import SchemaCatalog

    conn = UpstreamConfig.from_uri(db.uri).connect(conv=cs.reader_conv())
    try:
        cat = SchemaCatalog.load_from_upstream(conn, None, 1)
        out = {}
        for t in tables:
            info = cat.get(schema, t)
            assert info is not None
            conv = cs.RowConverter(info)
            with conn.cursor() as cur:
                cur.execute(f"SELECT {cs.select_list(info)} FROM {cs.table_ref(info)}")
                out[t] = Counter(cs.key_token(conv.convert(r)) for r in cur.fetchall())
    finally:
        conn.close()
    return out


def _collect(df: Any) -> dict[str, Counter[str]]:
    out: dict[str, Counter[str]] = {}
    for r in df.collect():
        before, after, shape = pickle.loads(r.payload)
        assert before is None and shape is None and r.op == "I"
        out.setdefault(r.table, Counter())[cs.key_token(after)] += 1
    return out


def _snapshot(spark: Any, db: LocalMariaDB, schema: str, tmp: Path, **kw: Any) -> InitialSnapshot:
    up = UpstreamConfig.from_uri(db.uri)
    start = head_offset(up)
    history = str(tmp / "schema_history.jsonl")
    bootstrap_history(up, history, start)
    return InitialSnapshot(
        spark,
        changefeed_id="snap-test",
        upstream_uri=db.uri,
        checkpoint_dir=str(tmp),
        history_path=history,
        handover=start,
        filter_rules=[f"{schema}.*"],
        **kw,
    )


def test_rows_are_the_state_at_the_handover_point(
    spark: Any, mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    db = fresh_db
    mariadb.execute(
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(20), n INT)",
        f"INSERT INTO `{db}`.t SELECT seq, CONCAT('v', seq), seq FROM `{db}`.seq_1_to_2000",
        f"CREATE TABLE `{db}`.uk (a INT NOT NULL, b VARCHAR(5) NOT NULL, c INT NULL, UNIQUE KEY u (a, b))",
        f"INSERT INTO `{db}`.uk SELECT seq, 'x', seq FROM `{db}`.seq_1_to_300",
        f"CREATE TABLE `{db}`.nokey (a INT, b VARCHAR(5))",
        f"INSERT INTO `{db}`.nokey VALUES (1, 'a'), (1, 'a'), (2, 'b'), (3, NULL)",
    )
    snap = _snapshot(spark, mariadb, db, tmp_path, options=SnapshotOptions(chunk_size=100), time_zone="UTC")
    at_s = _state(mariadb, db, ["t", "uk", "nokey"])
    # After S, before the plan: every kind of change, in ranges near the start and the end.
    mariadb.execute(
        f"UPDATE `{db}`.t SET v = 'changed' WHERE id IN (5, 1500, 1999)",
        f"DELETE FROM `{db}`.t WHERE id IN (6, 1600)",
        f"INSERT INTO `{db}`.t VALUES (5000, 'new', 0), (0, 'new', 0)",
        f"UPDATE `{db}`.t SET id = 7000 WHERE id = 10",  # a key change
        f"UPDATE `{db}`.t SET id = 10 WHERE id = 11",  # the freed key taken by another row
        f"UPDATE `{db}`.uk SET b = 'y' WHERE a = 3",
        f"DELETE FROM `{db}`.nokey WHERE a = 1 LIMIT 1",
        f"INSERT INTO `{db}`.nokey VALUES (2, 'b'), (4, 'd')",
        f"UPDATE `{db}`.nokey SET b = 'z' WHERE a = 3",
    )
    snap.plan(snap.tables())
    states = snap.store.load_all()
    first_t = min((s for s in states if s.table == "t"), key=lambda s: s.range_id)
    assert first_t.after is None and first_t.upto is not None
    # Between the plan and the reads: changes in ranges not yet copied, and 1000 new rows in the first
    # range of t, which then grows past twice its planned size and is split while it runs.
    mariadb.execute(
        f"INSERT INTO `{db}`.t SELECT -seq, 'grown', seq FROM `{db}`.seq_1_to_1000",
        f"UPDATE `{db}`.t SET n = n + 1 WHERE id BETWEEN 1000 AND 1100",
        f"DELETE FROM `{db}`.t WHERE id BETWEEN 1900 AND 1910",
        f"DELETE FROM `{db}`.t WHERE id = -5",
        f"UPDATE `{db}`.t SET v = 'twice' WHERE id = 5",
        f"DELETE FROM `{db}`.uk WHERE a > 250",
    )
    got: dict[str, Any] = {}

    def write(df: Any, ts: int) -> int:
        assert ts == snap.handover.ts
        got.update(_collect(df))
        return sum(sum(c.values()) for c in got.values())

    report = snap.run(write)
    assert got == at_s
    assert report["rows_written"] == sum(sum(c.values()) for c in at_s.values())
    assert report["splits"] >= 1 and report["rounds"] >= 2
    assert report["touched_keys"] > 1000
    states = snap.store.load_all()
    parent = next(s for s in states if s.range_id == first_t.range_id)
    assert parent.stage == STAGE_SPLIT and parent.children
    children = [s for s in states if s.parent == parent.range_id]
    assert {c.range_id for c in children} == set(parent.children)
    assert all(c.stage == STAGE_DONE for c in children)
    assert children[0].after == parent.last_key and children[-1].upto == parent.upto
    keyless = next(s for s in states if s.table == "nokey")
    assert keyless.read_position is not None and keyless.stage == STAGE_DONE
    assert snap.is_done() and not os.path.exists(snap.spool_dir)
    # Done means done: a second run reports the same and writes nothing.
    assert snap.run(lambda df, ts: pytest.fail("written twice")) == report


def test_progress_in_the_meta_store_and_a_finished_range_is_not_read_again(
    spark: Any, mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    db = fresh_db
    mariadb.execute(
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO `{db}`.t SELECT seq, seq FROM `{db}`.seq_1_to_3000",
    )
    store = MetaRangeStore(f"sqlite:///{tmp_path}/meta.db", "snap-meta")
    figures: list[Any] = []
    snap = _snapshot(
        spark,
        mariadb,
        db,
        tmp_path,
        options=SnapshotOptions(chunk_size=200, progress_interval_s=0.05),
        store=store,
        on_figures=figures.append,
    )
    at_s = _state(mariadb, db, ["t"])
    snap.plan(snap.tables())
    planned = store.load_all()
    assert len(planned) >= 4 and all(s.stage == "snapshot" for s in planned)
    # An earlier run that stopped after finishing one range: read it exactly as its task would.
    first, rest = planned[0], planned[1:]
    from sparkcdc.pipeline.snapshot import SnapshotTaskSpec, read_range

    spec = SnapshotTaskSpec(
        upstream_uri=mariadb.uri,
        time_zone="UTC",
        chunk_size=200,
        range_rows={f"{db}.t": 10**9},
        split_factor=2.0,
        spool_dir=snap.spool_dir,
        handover=snap.handover.to_json(),
        tables={f"{db}\x00t": snap.tables()[0].to_dict()},
        store=store,
        epoch=1,
    )
    done_first = read_range(spec, first)
    assert done_first.stage == STAGE_DONE and done_first.attempts == 1
    mariadb.execute(f"UPDATE `{db}`.t SET v = -v WHERE id > 2500")
    got: dict[str, Any] = {}
    snap.run(lambda df, ts: len(got.update(_collect(df)) or ()))
    assert got == at_s
    final = {s.range_id: s for s in store.load_all()}
    # The range finished before the run was not read again; every other range was read once.
    assert final[first.range_id].attempts == 1 and final[first.range_id].files == done_first.files
    assert all(final[r.range_id].attempts == 1 and final[r.range_id].stage == STAGE_DONE for r in rest)
    assert sum(s.rows_copied for s in final.values()) == 3000
    # Progress figures were reported while it ran, ending with every range done.
    assert figures and figures[-1].phase == "done"
    assert figures[-1].ranges_done == figures[-1].ranges_total == len(final)
    assert figures[-1].rows_copied == 3000
    # The meta store holds the rows in its range_progress table.
    from sparkcdc.meta.store import MetaStore

    rows = MetaStore.open(f"sqlite:///{tmp_path}/meta.db").get_range_progress("snap-meta")
    assert len(rows) == len(final) and all(
        r.stage == "log" and r.snapshot_version == snap.handover.ts for r in rows
    )
    assert FileRangeStore(str(tmp_path / "none")).load_all() == []


def test_a_csv_storage_sink_gets_upstream_rendered_chunks_corrected_to_the_handover_point(
    spark: Any, mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """Rendered chunks are staged by the range tasks; those of touched tables are rewritten without the keys."""
    from sparkcdc.codec.csv import CSVDecoder
    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.pipeline.writer import BatchWriter
    from sparkcdc.sink import create_sink

    db = fresh_db
    mariadb.execute(
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(20), d DOUBLE)",
        # every 7th DOUBLE needs an exponent in Go's form: those rows are read row by row
        f"INSERT INTO `{db}`.t SELECT seq, CONCAT('v\"', seq, ',\\r\\n'), IF(seq % 7, seq / 3, seq * 1e9) "
        f"FROM `{db}`.seq_1_to_3000",
        # chunks of 400 rows of 3 KB (1.2 MB) are staged as two files (file-size 1 MiB); of 6 KB rows
        # (2.4 MB) are more than a rendered chunk may hold (2 MB here): read again as 200 rows
        f"CREATE TABLE `{db}`.quiet (id BIGINT PRIMARY KEY, n INT, pad TEXT)",
        f"INSERT INTO `{db}`.quiet SELECT seq, seq, REPEAT('p', 3000) FROM `{db}`.seq_1_to_500",
        f"CREATE TABLE `{db}`.wide (id BIGINT PRIMARY KEY, pad TEXT)",
        f"INSERT INTO `{db}`.wide SELECT seq, REPEAT('w', 6000) FROM `{db}`.seq_1_to_500",
    )
    cfg = ReplicaConfig.from_dict(
        {"filter": {"rules": [f"{db}.*"]}, "sink": {"csv": {"include-commit-ts": True}}}
    )
    out = tmp_path / "out"
    sink = create_sink(f"file://{out}?protocol=csv&file-size=1048576", cfg, "snap-rendered")
    options = SnapshotOptions(chunk_size=400, rendered_max_bytes=2_000_000)
    snap = _snapshot(spark, mariadb, db, tmp_path, options=options, time_zone="UTC")
    writer = BatchWriter(sink, str(tmp_path / "spark"), snap.history_path, "snap-rendered", lambda r: None)
    at_s = _state(mariadb, db, ["t", "quiet", "wide"])
    mariadb.execute(
        f"UPDATE `{db}`.t SET v = 'changed' WHERE id IN (5, 1500, 2999)",
        f"UPDATE `{db}`.t SET d = 1e300 WHERE id = 8",
        f"DELETE FROM `{db}`.t WHERE id IN (6, 14, 1600)",
        f"INSERT INTO `{db}`.t VALUES (5000, 'new', 1.5), (0, 'new', 2.5)",
        f"UPDATE `{db}`.t SET id = 7000 WHERE id = 10",
    )
    report = snap.run(lambda df, ts: pytest.fail("a storage sink writes from the spool"), writer)
    sink.close()
    assert report["touched_keys"] >= 8
    files = sorted(out.rglob("CDC*.csv"))
    assert len(files) > 2 and not list(out.rglob(".sparkcdc-staging/**/*.csv"))
    infos = {t.table: t for t in snap.tables()}
    got: dict[str, Counter[str]] = {}
    dec = CSVDecoder(include_commit_ts=True)
    per_table: Counter[str] = Counter()
    for f in files:
        table = f.relative_to(out).parts[1]
        per_table[table] += 1
        for rec in dec.decode(f.read_bytes(), infos[table]):
            assert rec.op == "I" and rec.commit_ts == snap.handover.ts
            got.setdefault(table, Counter())[cs.key_token(rec.values)] += 1
    assert got == at_s
    assert report["rows_written"] == sum(sum(c.values()) for c in at_s.values())
    assert per_table["quiet"] >= 3 and per_table["wide"] >= 5
    # every chunk of the quiet table was staged by its range task and published as it was
    spooled = [f for s in snap.store.load_all() for f in s.files]
    assert any(f.endswith(".records.json") for f in spooled) and any(f.endswith(".parquet") for f in spooled)


def test_a_retried_range_task_resumes_from_the_stored_progress(
    spark: Any, mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """A task run again (its executor was lost) gets the round's stale states: the stored progress wins."""
    from sparkcdc.pipeline.snapshot import RangeState, SnapshotTaskSpec, read_range

    db = fresh_db
    mariadb.execute(
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO `{db}`.t SELECT seq, seq FROM `{db}`.seq_1_to_1000",
    )
    snap = _snapshot(spark, mariadb, db, tmp_path, options=SnapshotOptions(chunk_size=100))
    snap.plan(snap.tables())
    first, second = snap.store.load_all()[:2]
    spec = SnapshotTaskSpec(
        upstream_uri=mariadb.uri,
        time_zone="UTC",
        chunk_size=100,
        range_rows={f"{db}.t": 10**9},
        split_factor=2.0,
        spool_dir=snap.spool_dir,
        handover=snap.handover.to_json(),
        tables={f"{db}\x00t": snap.tables()[0].to_dict()},
        store=snap.store,
        epoch=1,
    )
    # The first attempt finished `first` and copied one chunk of `second` before it died.
    done = read_range(spec, RangeState.from_json(first.to_json()))
    after = cs.decode_key(second.after)[0] if second.after is not None else 0  # type: ignore[index]
    upto = cs.decode_key(second.upto)[0] if second.upto is not None else 1000  # type: ignore[index]
    partial = RangeState.from_json(second.to_json())
    partial.attempts, partial.epoch = 1, 1
    partial.last_key = cs.encode_key((after + 100,))  # ids are 1..1000: the range's first 100 keys
    partial.rows_copied = 100
    partial.files = ["kept-by-the-first-attempt.parquet"]
    snap.store.save(partial)
    # The retry is handed the states of the round's start (stale): it skips `first` and resumes `second`.
    again = read_range(spec, RangeState.from_json(first.to_json()))
    assert again.to_json() == done.to_json()
    resumed = read_range(spec, RangeState.from_json(second.to_json()))
    assert resumed.attempts == 2 and resumed.stage == STAGE_DONE
    assert resumed.files[0] == "kept-by-the-first-attempt.parquet" and len(resumed.files) > 1
    assert resumed.rows_copied == upto - after  # the simulated first chunk plus the rest, nothing twice
