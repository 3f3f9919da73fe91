"""A changefeed started in the past: one info line says what happens, and older rows decode without warnings.

The schema history is bootstrapped with the upstream's current tables at the binlog head; rows
written before a later ``ALTER TABLE`` have fewer columns than that shape. They are decoded with
their binlog table map, which is expected there (no warning); the same mismatch in rows read as
if they were newer than the bootstrap is still a warning.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sparkcdc.capture.reader import RowReader, TableShapes
from sparkcdc.capture.schema_history import SchemaHistory
from sparkcdc.capture.start import head_offset
from sparkcdc.model import RowChange
from sparkcdc.pipeline.start import bootstrap_history
from sparkcdc.pipeline.state import open_history_store
from sparkcdc.services.mariadb import LocalMariaDB

from .helpers import upstream

pytestmark = pytest.mark.integration

MISMATCH = "differ from the tracked shape"


def test_start_in_the_past(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    up = upstream(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, a VARCHAR(10))")
    start = head_offset(up)
    mariadb.execute(
        f"INSERT INTO `{fresh_db}`.t VALUES (1, 'old'), (2, 'old')",
        f"ALTER TABLE `{fresh_db}`.t ADD COLUMN b INT",
        f"INSERT INTO `{fresh_db}`.t VALUES (3, 'new', 3)",
    )
    head = head_offset(up)
    history_path = str(tmp_path / "schema_history.jsonl")
    with caplog.at_level(logging.INFO, logger="sparkcdc"):
        _ts, pos = bootstrap_history(up, history_path, start)
        bootstrap_history(up, history_path, start)  # a restart: already bootstrapped, nothing said
    said = [r for r in caplog.records if r.name == "sparkcdc.pipeline.start"]
    assert len(said) == 1 and said[0].levelno == logging.INFO
    assert "starting in the past" in said[0].getMessage()
    assert f"{start.file}:{start.pos}" in said[0].getMessage()
    assert pos is not None and (pos[0], pos[1]) == (head.file, head.pos)

    tracked = SchemaHistory.open(open_history_store(history_path)).catalog_at(start.ts).get(fresh_db, "t")
    assert tracked is not None and list(tracked.column_names) == ["id", "a", "b"]

    def read(shapes_from: tuple[int, int] | None) -> list[RowChange]:
        caplog.clear()
        reader = RowReader(
            up,
            start,
            head,
            shapes=TableShapes(lambda s, t: tracked if (s, t) == (fresh_db, "t") else None),
            shapes_from=shapes_from,
        )
        with caplog.at_level(logging.DEBUG, logger="sparkcdc.capture.reader"):
            return [ev for ev in reader.events() if isinstance(ev, RowChange) and ev.schema == fresh_db]

    rows = read(head.key())
    assert [r.after for r in rows] == [(1, "old"), (2, "old"), (3, "new", 3)]
    mismatches = [r for r in caplog.records if MISMATCH in r.getMessage()]
    assert mismatches and all(r.levelno == logging.DEBUG for r in mismatches)
    # the same rows taken for newer than the bootstrap: a real divergence, and a warning
    read(None)
    assert [r.levelno for r in caplog.records if MISMATCH in r.getMessage()] == [logging.WARNING]


def test_a_ddl_while_the_definitions_are_read_is_never_applied_twice(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CREATE TABLE logged between the binlog head and the read of the definitions (a new
    changefeed created just before the application's first DDL): the bootstrap position must be
    after it, or the planner applies it again on a catalog that has the table already."""
    from sparkcdc.capture.catalog import SchemaCatalog
    from sparkcdc.capture.offset import file_seq

    up = upstream(mariadb)
    start = head_offset(up)
    real = SchemaCatalog.load_from_upstream.__func__  # type: ignore[attr-defined]
    calls: list[int] = []

    def load(cls: type[SchemaCatalog], conn: object, *args: object, **kwargs: object) -> SchemaCatalog:
        calls.append(1)
        if len(calls) == 1:  # the application's DDL lands after the head was read
            mariadb.execute(f"CREATE TABLE `{fresh_db}`.raced (id INT PRIMARY KEY)")
        return real(cls, conn, *args, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(SchemaCatalog, "load_from_upstream", classmethod(load))
    _ts, pos = bootstrap_history(up, str(tmp_path / "schema_history.jsonl"), start, head=start)
    ddl_end = head_offset(up)
    assert len(calls) == 2, "the definitions are read again after the DDL"
    assert pos is not None and (file_seq(pos[0]), pos[1]) == ddl_end.key()
    tracked = SchemaHistory.open(open_history_store(str(tmp_path / "schema_history.jsonl")))
    assert tracked.catalog_at(start.ts).get(fresh_db, "raced") is not None


def test_ddl_between_finds_a_ddl_and_nothing_else(mariadb: LocalMariaDB, fresh_db: str) -> None:
    from sparkcdc.pipeline.start import ddl_between

    up = upstream(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
    a = head_offset(up)
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1)", f"UPDATE `{fresh_db}`.t SET id = 2")
    b = head_offset(up)
    assert ddl_between(up, a, b.key()) is None
    assert ddl_between(up, b, b.key()) is None
    mariadb.execute(
        f"ALTER TABLE `{fresh_db}`.t ADD COLUMN c INT", f"INSERT INTO `{fresh_db}`.t VALUES (3, 3)"
    )
    c = head_offset(up)
    found = ddl_between(up, a, c.key())
    assert found == (f"{b.file}:{b.pos}", f"ALTER TABLE `{fresh_db}`.t")
    # named by its first words only: an account statement is logged with its password
    d = head_offset(up)
    mariadb.execute(
        "CREATE USER 'ddl_between'@'%' IDENTIFIED BY 'hunter2-secret'", "DROP USER 'ddl_between'@'%'"
    )
    assert ddl_between(up, d, head_offset(up).key()) == (f"{d.file}:{d.pos}", "CREATE USER 'ddl_between'@'%'")
