"""The schema catalog scoped by the changefeed's table filter, and UUID/INET4/INET6 in DDL.

A table the filter leaves out never fails the catalog: its failing DDL (a type sparkcdc cannot
read, a statement the parser does not know, a table the catalog never loaded) makes the catalog
forget the table. The same failure on a captured table is an error naming table and column.
"""

from __future__ import annotations

import pytest

from sparkcdc.capture.catalog import BINLOG_TYPES, SchemaCatalog
from sparkcdc.capture.catalog.scope import unparsed_table, written_tables
from sparkcdc.capture.ddl import parse_statement
from sparkcdc.capture.schema_history import MemorySchemaHistoryStore, SchemaHistory
from sparkcdc.errors import SchemaError
from sparkcdc.filter import changefeed_filter


def _catalog(rules: list[str] | None = None) -> SchemaCatalog:
    cat = SchemaCatalog(captured=changefeed_filter(rules or ["app.*"]).match)
    for db in ("app", "other"):
        cat.apply_ddl(f"CREATE DATABASE {db}", None, 10)
    cat.apply_ddl("CREATE TABLE app.kept (id int PRIMARY KEY)", None, 20)
    cat.apply_ddl("CREATE TABLE other.t (id int PRIMARY KEY)", None, 20)
    return cat


def test_uuid_inet_columns_parse_as_mariadb_reports_them() -> None:
    cat = _catalog()
    cat.apply_ddl(
        "CREATE TABLE app.u (id UUID PRIMARY KEY, a INET4 NOT NULL DEFAULT '0.0.0.0', b inet6, c uuid NULL)",
        None,
        30,
    )
    info = cat.get("app", "u")
    assert info is not None
    assert [(c.name, c.type, c.nullable, c.charset, c.length) for c in info.columns] == [
        ("id", "uuid", False, None, None),
        ("a", "inet4", False, None, None),
        ("b", "inet6", True, None, None),
        ("c", "uuid", True, None, None),
    ]
    assert info.columns[1].default == "0.0.0.0"
    assert info.primary_key == ("id",)
    assert [c.full_type() for c in info.columns] == ["uuid", "inet4", "inet6", "uuid"]
    # the binlog's table map says BINARY(n) (type 254) for them
    assert all(254 in BINLOG_TYPES[t] for t in ("uuid", "inet4", "inet6"))
    cat.apply_ddl("ALTER TABLE app.u MODIFY b UUID, ADD d INET6 AFTER a", None, 40)
    info = cat.get("app", "u")
    assert info is not None
    assert [(c.name, c.type) for c in info.columns] == [
        ("id", "uuid"),
        ("a", "inet4"),
        ("d", "inet6"),
        ("b", "uuid"),
        ("c", "uuid"),
    ]


def test_an_unknown_type_outside_the_filter_is_forgotten() -> None:
    cat = _catalog()
    assert cat.apply_ddl("CREATE TABLE other.v (id int, x VECTOR(3))", None, 30) == []
    assert cat.forgotten == [("other", "v")]
    assert cat.get("other", "v") is None
    # a later ALTER of the table the catalog never knew is forgotten too
    assert cat.apply_ddl("ALTER TABLE other.v ADD y int", None, 40) == []
    assert cat.forgotten == [("other", "v")]
    # a DDL that applies clears the list
    assert cat.apply_ddl("ALTER TABLE app.kept ADD z int", None, 50) != []
    assert cat.forgotten == []


def test_a_tracked_table_outside_the_filter_is_forgotten_when_its_ddl_fails() -> None:
    cat = _catalog()
    assert cat.apply_ddl("ALTER TABLE t ADD v VECTOR(3)", "other", 30) == []
    assert cat.forgotten == [("other", "t")]
    assert cat.get("other", "t") is None


def test_the_same_type_in_a_captured_table_fails_naming_the_column() -> None:
    cat = _catalog()
    with pytest.raises(SchemaError, match=r"column 'x' has type VECTOR"):
        cat.apply_ddl("CREATE TABLE app.v (id int, x VECTOR(3))", None, 30)
    assert cat.get("app", "v") is None
    # without a filter every table is captured: the old strict behaviour
    strict = SchemaCatalog()
    strict.apply_ddl("CREATE DATABASE other", None, 10)
    with pytest.raises(SchemaError, match="VECTOR"):
        strict.apply_ddl("CREATE TABLE other.v (x VECTOR(3))", None, 30)


def test_an_unparsable_statement_is_scoped_by_the_table_it_names() -> None:
    cat = _catalog()
    assert cat.apply_ddl("ALTER TABLE `other`.`t` ADD COLUMN (", None, 30) == []
    assert cat.forgotten == [("other", "t")]
    assert cat.get("other", "t") is None
    assert cat.apply_ddl("CREATE TABLE w (a int,, b)", "other", 35) == []
    assert cat.forgotten == [("other", "w")]
    with pytest.raises(SchemaError, match="cannot parse DDL"):
        cat.apply_ddl("ALTER TABLE kept ADD COLUMN (", "app", 40)
    assert cat.get("app", "kept") is not None


def test_a_rename_into_the_filter_of_an_unknown_table_still_fails() -> None:
    cat = _catalog()
    cat.apply_ddl("CREATE TABLE other.v (x VECTOR(3))", None, 30)
    with pytest.raises(SchemaError, match="does not know"):
        cat.apply_ddl("RENAME TABLE other.v TO app.v", None, 40)


def test_written_tables_and_unparsed_names() -> None:
    q = "RENAME TABLE a TO b, x.c TO y.d"
    assert written_tables(parse_statement(q), "db", q) == [("db", "a"), ("db", "b"), ("x", "c"), ("y", "d")]
    q = "ALTER TABLE a RENAME TO z.b"
    assert written_tables(parse_statement(q), "db", q) == [("db", "a"), ("z", "b")]
    q = "CREATE DATABASE q"
    assert written_tables(parse_statement(q), "db", q) is None
    assert unparsed_table("/* c */ CREATE OR REPLACE TABLE IF NOT EXISTS `s``x`.t (a ...", None) == (
        "s`x",
        "t",
    )
    assert unparsed_table("ALTER ONLINE TABLE t nonsense", "db") == ("db", "t")
    assert unparsed_table("ALTER TABLE t nonsense", None) is None
    assert unparsed_table("GRANT ALL ON x.* TO y", "db") is None


def test_the_history_records_a_forgotten_table_and_replays_it() -> None:
    store = MemorySchemaHistoryStore()
    match = changefeed_filter(["app.*"]).match
    h = SchemaHistory(store, captured=match)
    h.bootstrap(_catalog(), 25)
    cat = h.catalog_at(25)
    assert cat.captured is match
    assert h.apply(cat, "ALTER TABLE other.t ADD v VECTOR(3)", None, 30) == []
    assert h.at("other", "t", 29) is not None
    assert h.at("other", "t", 30) is None
    again = SchemaHistory.open(store, captured=match)
    assert again.at("other", "t", 29) is not None
    assert again.at("other", "t", 30) is None
    assert again.catalog_at(30).get("other", "t") is None
    assert again.events() == []
