"""A unique key over an application-time period ``WITHOUT OVERLAPS`` (MariaDB 10.5+) is marked as
such in the catalog, through DDL, ALTER and the schema history's round trip: the MySQL sink must
not ``REPLACE`` into such a table (MariaDB refuses it)."""

from __future__ import annotations

import pytest

from sparkcdc.capture.catalog import SchemaCatalog
from sparkcdc.errors import SchemaError
from sparkcdc.model import TableInfo

CREATE = (
    "CREATE TABLE rooms (id INT, s DATE NOT NULL, e DATE NOT NULL, v INT, PERIOD FOR p (s, e), "
    "PRIMARY KEY (id, p WITHOUT OVERLAPS))"
)


def _catalog() -> SchemaCatalog:
    cat = SchemaCatalog()
    cat.add_database("d")
    cat.apply_ddl(CREATE, "d", 10)
    return cat


def test_a_period_key_is_marked_and_holds_the_end_then_the_start() -> None:
    info = _catalog().get("d", "rooms")
    assert info is not None
    (pk,) = info.indexes
    assert pk.primary and pk.without_overlaps
    assert pk.columns == ("id", "e", "s")
    assert info.handle_key == ("id", "e", "s")


def test_a_unique_period_key_added_later_is_marked_and_other_keys_are_not() -> None:
    cat = SchemaCatalog()
    cat.add_database("d")
    cat.apply_ddl("CREATE TABLE r (id INT PRIMARY KEY, k INT, s DATE NOT NULL, e DATE NOT NULL)", "d", 10)
    cat.apply_ddl("ALTER TABLE r ADD PERIOD FOR p (s, e), ADD UNIQUE KEY u (k, p WITHOUT OVERLAPS)", "d", 11)
    info = cat.get("d", "r")
    assert info is not None
    flags = {ix.name: ix.without_overlaps for ix in info.indexes}
    assert flags == {"PRIMARY": False, "u": True}


def test_the_mark_survives_the_round_trip_and_plain_keys_are_written_as_before() -> None:
    cat = _catalog()
    cat.apply_ddl("CREATE TABLE plain (id INT PRIMARY KEY)", "d", 12)
    back = SchemaCatalog.from_dict(cat.to_dict())
    rooms, plain = back.get("d", "rooms"), back.get("d", "plain")
    assert rooms is not None and plain is not None
    assert rooms.indexes[0].without_overlaps
    assert TableInfo.from_dict(rooms.to_dict()) == rooms
    assert "without_overlaps" not in plain.to_dict()["indexes"][0]
    # a history written before the flag existed reads as no period key
    assert not TableInfo.from_dict(plain.to_dict()).indexes[0].without_overlaps


def _keys(cat: SchemaCatalog, table: str) -> dict[str, tuple[tuple[str, ...], bool]]:
    info = cat.get("d", table)
    assert info is not None
    return {ix.name: (ix.columns, ix.without_overlaps) for ix in info.indexes}


def test_a_key_over_a_period_an_earlier_statement_defined_resolves_through_the_catalog() -> None:
    cat = SchemaCatalog()
    cat.add_database("d")
    cat.apply_ddl(
        "CREATE TABLE r (id INT NOT NULL, k INT, s DATE NOT NULL, e DATE NOT NULL, PERIOD FOR p (s, e))",
        "d",
        10,
    )
    # the catalog is saved with the schema history and read back between the statements
    cat = SchemaCatalog.from_dict(cat.to_dict())
    cat.apply_ddl("ALTER TABLE r ADD PRIMARY KEY (id, p WITHOUT OVERLAPS)", "d", 11)
    cat.apply_ddl("CREATE UNIQUE INDEX u ON r (k, p WITHOUT OVERLAPS)", "d", 12)
    assert _keys(cat, "r") == {"PRIMARY": (("id", "e", "s"), True), "u": (("k", "e", "s"), True)}
    info = cat.get("d", "r")
    assert info is not None and info.handle_key == ("id", "e", "s")


def test_periods_added_dropped_renamed_and_copied_by_like() -> None:
    cat = SchemaCatalog()
    cat.add_database("d")
    cat.apply_ddl("CREATE TABLE r (id INT NOT NULL, a DATE NOT NULL, b DATE NOT NULL)", "d", 10)
    cat.apply_ddl("ALTER TABLE r ADD PERIOD IF NOT EXISTS FOR q (a, b)", "d", 11)
    cat.apply_ddl("ALTER TABLE r ADD PERIOD IF NOT EXISTS FOR q (a, b)", "d", 12)  # there: nothing
    cat.apply_ddl("ALTER TABLE r RENAME COLUMN a TO a2", "d", 13)  # MariaDB refuses CHANGE here
    cat.apply_ddl("CREATE TABLE r2 LIKE r", "d", 14)
    cat.apply_ddl("ALTER TABLE r2 ADD UNIQUE KEY u (id, q WITHOUT OVERLAPS)", "d", 15)
    assert _keys(cat, "r2") == {"u": (("id", "b", "a2"), True)}
    cat.apply_ddl("ALTER TABLE r DROP PERIOD FOR q", "d", 16)
    cat.apply_ddl("ALTER TABLE r DROP PERIOD IF EXISTS FOR q", "d", 17)
    with pytest.raises(SchemaError, match="WITHOUT OVERLAPS names period 'q', which the table does not have"):
        cat.apply_ddl("ALTER TABLE r ADD UNIQUE KEY u (id, q WITHOUT OVERLAPS)", "d", 18)
    with pytest.raises(SchemaError, match="period 'q' does not exist"):
        cat.apply_ddl("ALTER TABLE r DROP PERIOD FOR q", "d", 19)


def test_system_versioning_periods_stay_unsupported() -> None:
    cat = SchemaCatalog()
    cat.add_database("d")
    cat.apply_ddl("CREATE TABLE r (id INT PRIMARY KEY, s TIMESTAMP(6), e TIMESTAMP(6))", "d", 10)
    with pytest.raises(SchemaError, match="system-versioned"):
        cat.apply_ddl(
            "ALTER TABLE r ADD COLUMN rs TIMESTAMP(6) GENERATED ALWAYS AS ROW START, "
            "ADD COLUMN re TIMESTAMP(6) GENERATED ALWAYS AS ROW END, ADD PERIOD FOR SYSTEM_TIME(rs, re), "
            "ADD SYSTEM VERSIONING",
            "d",
            11,
        )


def test_a_key_may_come_before_its_period_and_an_index_before_its_column() -> None:
    # MariaDB builds an ALTER's columns, then its periods, then its keys, whatever the written
    # order (both statements checked on MariaDB 10.11); CREATE TABLE likewise.
    cat = SchemaCatalog()
    cat.add_database("d")
    cat.apply_ddl(
        "CREATE TABLE c (id INT, PRIMARY KEY (id, q WITHOUT OVERLAPS), a DATE NOT NULL, "
        "b DATE NOT NULL, PERIOD FOR q (a, b))",
        "d",
        10,
    )
    cat.apply_ddl("CREATE TABLE r (id INT PRIMARY KEY, a DATE NOT NULL, b DATE NOT NULL)", "d", 11)
    cat.apply_ddl(
        "ALTER TABLE r ADD UNIQUE KEY u (id, q WITHOUT OVERLAPS), ADD INDEX ix (n), ADD PERIOD FOR q (a, b), "
        "ADD COLUMN n INT",
        "d",
        12,
    )
    assert _keys(cat, "c") == {"PRIMARY": (("id", "b", "a"), True)}
    assert _keys(cat, "r") == {
        "PRIMARY": (("id",), False),
        "u": (("id", "b", "a"), True),
        "ix": (("n",), False),
    }
