"""A unique key over an application-time period ``WITHOUT OVERLAPS`` (MariaDB 10.5+) is marked as
such in the catalog, through DDL, ALTER and the schema history's round trip: the MySQL sink must
not ``REPLACE`` into such a table (MariaDB refuses it)."""

from __future__ import annotations

from sparkcdc.capture.catalog import SchemaCatalog
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
