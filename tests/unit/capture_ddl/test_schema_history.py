"""SchemaHistory: versions over time, persistence round trip, torn writes and idempotent replay."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from sparkcdc.capture.catalog import SchemaCatalog
from sparkcdc.capture.schema_history import FileSchemaHistoryStore, MemorySchemaHistoryStore, SchemaHistory
from sparkcdc.errors import SchemaError
from sparkcdc.model.events import DDLType


def _catalog() -> SchemaCatalog:
    c = SchemaCatalog()
    c.apply_ddl("CREATE DATABASE db CHARACTER SET latin1", None, 50)
    c.apply_ddl("CREATE TABLE t (id int PRIMARY KEY)", "db", 60)
    c.applied_ts = 100
    return c


def _history(
    store: MemorySchemaHistoryStore | FileSchemaHistoryStore | None = None,
) -> tuple[SchemaHistory, SchemaCatalog]:
    h = SchemaHistory(store)
    cat = _catalog()
    h.bootstrap(cat, 100)
    return h, cat


SCRIPT = [
    ("ALTER TABLE t ADD COLUMN a varchar(5)", 200),
    ("INSERT INTO t VALUES (1, 'x')", 250),
    ("ALTER TABLE t ADD COLUMN b int, DROP COLUMN a", 300),
    ("CREATE TABLE u (x int)", 350),
    ("RENAME TABLE t TO t_old, u TO t", 400),
    ("DROP TABLE t_old", 500),
    ("CREATE TABLE t_old (z text)", 600),
    ("CREATE DATABASE db2", 650),
    ("CREATE TABLE db2.w (k char(2))", 660),
    ("DROP DATABASE db2", 700),
]


def _run(h: SchemaHistory, cat: SchemaCatalog) -> None:
    for sql, ts in SCRIPT:
        h.apply(cat, sql, "db", ts)


def test_at_returns_the_shape_in_force_for_each_commit_ts() -> None:
    h, cat = _history()
    _run(h, cat)
    assert h.at("db", "t", 99) is None  # before the bootstrap
    assert h.at("db", "t", 100).column_names == ("id",)  # type: ignore[union-attr]
    assert h.at("db", "t", 199).column_names == ("id",)  # type: ignore[union-attr]
    assert h.at("db", "t", 200).column_names == ("id", "a")  # type: ignore[union-attr]
    assert h.at("db", "t", 299).version == 200  # type: ignore[union-attr]
    assert h.at("db", "t", 300).column_names == ("id", "b")  # type: ignore[union-attr]
    assert h.at("db", "t", 400).column_names == ("x",)  # type: ignore[union-attr]
    assert h.at("db", "t_old", 399) is None
    assert h.at("db", "t_old", 400).column_names == ("id", "b")  # type: ignore[union-attr]
    assert h.at("db", "t_old", 500) is None  # dropped
    assert h.at("db", "t_old", 600).column_names == ("z",)  # type: ignore[union-attr]
    assert h.at("db", "t_old", 600).column("z").charset == "latin1"  # type: ignore[union-attr]
    assert h.at("db2", "w", 660).column("k").charset == "utf8mb4"  # type: ignore[union-attr]
    assert h.at("db2", "w", 700) is None  # its database was dropped
    assert h.versions("db", "t") == [100, 200, 300, 400]
    assert h.versions("db", "t_old") == [400, 600]
    assert h.versions("db", "nope") == []


def test_catalog_at_rebuilds_every_table_and_database() -> None:
    h, cat = _history()
    _run(h, cat)
    assert h.catalog_at(700) == cat
    at_450 = h.catalog_at(450)
    assert sorted((t.table, t.column_names) for t in at_450.tables()) == [
        ("t", ("x",)),
        ("t_old", ("id", "b")),
    ]
    assert at_450.databases() == {"db"} and at_450.applied_ts == 450
    assert h.catalog_at(660).databases() == {"db", "db2"}
    # a catalog restored at an earlier point applies later DDL the same way
    restored = h.catalog_at(350)
    for sql, ts in SCRIPT[4:]:
        h.apply(restored, sql, "db", ts)
    assert restored == cat


def test_file_store_round_trip_resumes_with_the_same_versions(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "history.jsonl"
    h, cat = _history(FileSchemaHistoryStore(path))
    _run(h, cat)
    again = SchemaHistory.open(FileSchemaHistoryStore(path))
    for table in ("t", "t_old", "u"):
        assert again.versions("db", table) == h.versions("db", table)
        for ts in (100, 200, 300, 400, 500, 600, 700):
            assert again.at("db", table, ts) == h.at("db", table, ts)
    assert again.catalog_at(700) == h.catalog_at(700) == cat
    assert [e.query for e in again.events(250)] == [e.query for e in h.events(250)]
    assert all(orjson.loads(line)["format"] == 1 for line in path.read_bytes().splitlines())


def test_recording_the_same_ddl_twice_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    h, cat = _history(FileSchemaHistoryStore(path))
    evs = h.apply(cat, "ALTER TABLE t ADD COLUMN a int", "db", 200)
    lines = path.read_bytes().count(b"\n")
    assert h.record(evs[0]) is False
    h.bootstrap(cat, 100)
    assert path.read_bytes().count(b"\n") == lines
    # a binlog re-scan after a restart: the catalog is already past it, nothing is applied twice
    again = SchemaHistory.open(FileSchemaHistoryStore(path))
    restored = again.catalog_at(200)
    replayed = again.apply(restored, "ALTER TABLE t ADD COLUMN a int", "db", 200)
    assert [(e.ddl_type, e.table, e.commit_ts) for e in replayed] == [(DDLType.ALTER_TABLE, "t", 200)]
    assert restored.get("db", "t").column_names == ("id", "a")  # type: ignore[union-attr]
    assert path.read_bytes().count(b"\n") == lines
    assert again.versions("db", "t") == [100, 200]
    # replaying from an earlier checkpoint re-applies to the catalog but records nothing new
    earlier = again.catalog_at(150)
    assert [e.ddl_type for e in again.apply(earlier, "ALTER TABLE t ADD COLUMN a int", "db", 200)] == [
        DDLType.ALTER_TABLE
    ]
    assert earlier == restored
    assert path.read_bytes().count(b"\n") == lines


def test_torn_last_line_is_dropped_and_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    h, cat = _history(FileSchemaHistoryStore(path))
    h.apply(cat, "ALTER TABLE t ADD COLUMN a int", "db", 200)
    good = path.read_bytes()
    path.write_bytes(good + b'{"format": 1, "kind": "ddl", "ts": 3')  # a crash mid-append
    again = SchemaHistory.open(FileSchemaHistoryStore(path))
    assert again.versions("db", "t") == [100, 200]
    again.apply(again.catalog_at(200), "ALTER TABLE t ADD COLUMN b int", "db", 300)
    data = path.read_bytes()
    assert data.startswith(good) and data.endswith(b"\n") and b'"ts": 3' not in data
    assert SchemaHistory.open(FileSchemaHistoryStore(path)).versions("db", "t") == [100, 200, 300]


def test_corrupt_middle_line_is_a_loud_error(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    h, cat = _history(FileSchemaHistoryStore(path))
    h.apply(cat, "ALTER TABLE t ADD COLUMN a int", "db", 200)
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join([lines[0], b"{not json", *lines[1:]]))
    with pytest.raises(SchemaError, match="corrupt at line 2"):
        SchemaHistory.open(FileSchemaHistoryStore(path))


def test_missing_file_is_an_empty_history(tmp_path: Path) -> None:
    h = SchemaHistory.open(FileSchemaHistoryStore(tmp_path / "none.jsonl"))
    assert h.empty and h.at("db", "t", 10) is None and h.catalog_at(10).tables() == []


def test_record_without_apply_and_rename_swap_at_one_ts() -> None:
    store = MemorySchemaHistoryStore()
    h, cat = _history(store)
    cat.apply_ddl("CREATE TABLE u (x int)", "db", 150)
    for ev in cat.apply_ddl("CREATE TABLE u2 (y int)", "db", 160):
        assert h.record(ev, cat.meta(ev.schema, ev.table))
    evs = cat.apply_ddl("RENAME TABLE t TO tmp, u2 TO t, tmp TO u2", "db", 200)
    for ev in evs:
        h.record(ev)
    assert h.at("db", "t", 200).column_names == ("y",)  # type: ignore[union-attr]
    assert h.at("db", "u2", 200).column_names == ("id",)  # type: ignore[union-attr]
    assert h.at("db", "tmp", 200) is None
    assert h.at("db", "u", 200) is None  # never recorded
    assert len(store.entries) == 1 + 1 + 3
    assert SchemaHistory.open(MemorySchemaHistoryStore(store.entries)).catalog_at(200) == h.catalog_at(200)


def test_unknown_entry_kind_is_refused() -> None:
    with pytest.raises(SchemaError, match="unknown schema history entry kind"):
        SchemaHistory.open(MemorySchemaHistoryStore([{"kind": "future", "ts": 1}]))


def test_a_second_bootstrap_replaces_the_table_set() -> None:
    h, _ = _history()
    other = SchemaCatalog()
    other.add_database("db")
    other.apply_ddl("CREATE TABLE fresh (q int)", "db", 900)
    h.bootstrap(other, 1000)
    assert h.at("db", "t", 999) is not None and h.at("db", "t", 1000) is None
    assert h.at("db", "fresh", 1000).column_names == ("q",)  # type: ignore[union-attr]


def test_record_finds_the_table_meta_in_a_catalog_it_handed_out() -> None:
    h, _ = _history()
    cat = h.catalog_at(100)
    evs = cat.apply_ddl("CREATE TABLE bin_t (a varchar(3)) CHARSET utf8mb4 COLLATE utf8mb4_bin", "db", 200)
    evs += cat.apply_ddl("CREATE TABLE fk_t (a int, FOREIGN KEY (a) REFERENCES t (id))", "db", 210)
    for ev in evs:
        h.record(ev)  # no meta given, as a planner that applies DDL itself does
    rebuilt = h.catalog_at(210)
    assert rebuilt == cat
    # so later DDL applies the same way on the rebuilt catalog: the table collation and the
    # FK-generated index (dropped once another index covers it) survive
    later = ["ALTER TABLE bin_t ADD COLUMN b char(1)", "ALTER TABLE fk_t ADD COLUMN b int, ADD KEY (a, b)"]
    for i, sql in enumerate(later):
        cat.apply_ddl(sql, "db", 300 + i)
        rebuilt.apply_ddl(sql, "db", 300 + i)
    assert rebuilt == cat
    assert rebuilt.get("db", "bin_t").column("b").collation == "utf8mb4_bin"  # type: ignore[union-attr]
    assert [i.name for i in rebuilt.get("db", "fk_t").indexes] == ["a"]  # type: ignore[union-attr]
