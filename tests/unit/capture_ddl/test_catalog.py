"""SchemaCatalog.apply_ddl: events, DDLType classification, errors, persistence, reconcile."""

from __future__ import annotations

import pytest

from sparkcdc.capture.catalog import SchemaCatalog, TableMeta, reconcile
from sparkcdc.errors import SchemaError
from sparkcdc.model.events import DDLType
from sparkcdc.model.schema import IndexInfo


@pytest.fixture()
def cat() -> SchemaCatalog:
    c = SchemaCatalog()
    c.apply_ddl("CREATE DATABASE db", None, 1)
    c.apply_ddl("CREATE TABLE t (id int PRIMARY KEY, a varchar(10), b int, KEY ka (a))", "db", 2)
    return c


def kinds(c: SchemaCatalog, sql: str, ts: int, db: str | None = "db") -> list[tuple[DDLType, str, str]]:
    return [(e.ddl_type, e.schema, e.table) for e in c.apply_ddl(sql, db, ts)]


@pytest.mark.parametrize(
    ("sql", "ddl_type"),
    [
        ("ALTER TABLE t ADD COLUMN c int", DDLType.ALTER_TABLE),
        ("ALTER TABLE t ADD INDEX kb (b)", DDLType.ADD_INDEX),
        ("ALTER TABLE t ADD UNIQUE (b)", DDLType.ADD_INDEX),
        ("ALTER TABLE t ADD FULLTEXT (a)", DDLType.ADD_INDEX),
        ("ALTER TABLE t ADD INDEX kb (b), ALGORITHM=INPLACE, LOCK=NONE", DDLType.ADD_INDEX),
        ("CREATE INDEX kb ON t (b)", DDLType.ADD_INDEX),
        ("CREATE UNIQUE INDEX kb ON t (b)", DDLType.ADD_INDEX),
        ("ALTER TABLE t DROP INDEX ka", DDLType.DROP_INDEX),
        ("ALTER TABLE t DROP KEY ka", DDLType.DROP_INDEX),
        ("ALTER TABLE t DROP PRIMARY KEY", DDLType.DROP_INDEX),
        ("DROP INDEX ka ON t", DDLType.DROP_INDEX),
        ("DROP INDEX `PRIMARY` ON t", DDLType.DROP_INDEX),
        ("ALTER TABLE t ADD INDEX kb (b), DROP INDEX ka", DDLType.ALTER_TABLE),
        ("ALTER TABLE t RENAME INDEX ka TO kz", DDLType.ALTER_TABLE),
        ("ALTER TABLE t MODIFY a varchar(20)", DDLType.ALTER_TABLE),
        ("ALTER TABLE t ALTER a SET DEFAULT 'x'", DDLType.ALTER_TABLE),
        ("ALTER TABLE t COMMENT 'x'", DDLType.ALTER_TABLE),
        ("ALTER TABLE t ENGINE=InnoDB", DDLType.ALTER_TABLE),
        ("ALTER TABLE t CONVERT TO CHARACTER SET latin1", DDLType.ALTER_TABLE),
        ("ALTER TABLE t FORCE", DDLType.ALTER_TABLE),
        ("ALTER TABLE t PARTITION BY HASH (id) PARTITIONS 2", DDLType.ALTER_TABLE),
        ("ALTER TABLE t ADD CONSTRAINT c CHECK (b > 0)", DDLType.ALTER_TABLE),
    ],
)
def test_alter_table_classification(cat: SchemaCatalog, sql: str, ddl_type: DDLType) -> None:
    evs = cat.apply_ddl(sql, "db", 10)
    assert len(evs) == 1
    ev = evs[0]
    assert (ev.ddl_type, ev.schema, ev.table, ev.commit_ts, ev.table_version) == (ddl_type, "db", "t", 10, 10)
    assert ev.table_info is not None and ev.table_info.version == 10 and ev.query == sql
    assert cat.get("db", "t") == ev.table_info


def test_schema_level_events(cat: SchemaCatalog) -> None:
    assert kinds(cat, "CREATE SCHEMA IF NOT EXISTS s2 DEFAULT CHARACTER SET latin1", 3) == [
        (DDLType.CREATE_SCHEMA, "s2", "")
    ]
    assert cat.database_charset("s2") == ("latin1", "latin1_swedish_ci")
    assert kinds(cat, "CREATE DATABASE IF NOT EXISTS s2", 4) == []
    assert kinds(cat, "ALTER DATABASE s2 COLLATE utf8mb4_bin", 5) == [(DDLType.ALTER_SCHEMA, "s2", "")]
    assert cat.database_charset("s2") == ("utf8mb4", "utf8mb4_bin")
    cat.apply_ddl("CREATE TABLE s2.x (a varchar(3))", None, 6)
    assert cat.get("s2", "x").column("a").collation == "utf8mb4_bin"  # type: ignore[union-attr]
    assert kinds(cat, "DROP SCHEMA s2", 7) == [(DDLType.DROP_SCHEMA, "s2", "")]
    assert cat.get("s2", "x") is None and "s2" not in cat.databases()
    assert kinds(cat, "DROP DATABASE IF EXISTS s2", 8) == []
    with pytest.raises(SchemaError, match="s2"):
        cat.apply_ddl("DROP DATABASE s2", None, 9)


def test_create_table_variants(cat: SchemaCatalog) -> None:
    assert kinds(cat, "CREATE TABLE IF NOT EXISTS t (x int)", 3) == []
    assert cat.get("db", "t").column_names == ("id", "a", "b")  # type: ignore[union-attr]
    assert kinds(cat, "CREATE TABLE t2 LIKE t", 4) == [(DDLType.CREATE_TABLE, "db", "t2")]
    t2 = cat.get("db", "t2")
    assert t2 is not None and t2.columns == cat.get("db", "t").columns and t2.version == 4  # type: ignore[union-attr]
    assert kinds(cat, "CREATE OR REPLACE TABLE t2 (z int)", 5) == [(DDLType.CREATE_TABLE, "db", "t2")]
    assert cat.get("db", "t2").column_names == ("z",)  # type: ignore[union-attr]
    with pytest.raises(SchemaError, match="already has this table"):
        cat.apply_ddl("CREATE TABLE t2 (z int)", "db", 6)
    with pytest.raises(SchemaError, match=r"CREATE TABLE \.\.\. SELECT"):
        cat.apply_ddl("CREATE TABLE t3 AS SELECT * FROM t", "db", 7)


def test_drop_truncate_rename(cat: SchemaCatalog) -> None:
    cat.apply_ddl("CREATE TABLE u (x int)", "db", 3)
    assert kinds(cat, "TRUNCATE TABLE u", 4) == [(DDLType.TRUNCATE_TABLE, "db", "u")]
    assert cat.get("db", "u").version == 4  # type: ignore[union-attr]
    assert kinds(cat, "TRUNCATE u", 5) == [(DDLType.TRUNCATE_TABLE, "db", "u")]
    # a swap in one statement
    evs = cat.apply_ddl("RENAME TABLE t TO tmp, u TO t, tmp TO u", "db", 6)
    assert [(e.old_table, e.table) for e in evs] == [("t", "tmp"), ("u", "t"), ("tmp", "u")]
    assert all(e.ddl_type == DDLType.RENAME_TABLE for e in evs)
    assert cat.get("db", "t").column_names == ("x",)  # type: ignore[union-attr]
    assert cat.get("db", "u").column_names == ("id", "a", "b")  # type: ignore[union-attr]
    assert cat.get("db", "tmp") is None
    evs = cat.apply_ddl("ALTER TABLE u RENAME TO db.v", "db", 7)
    assert [(e.ddl_type, e.old_schema, e.old_table, e.schema, e.table) for e in evs] == [
        (DDLType.RENAME_TABLE, "db", "u", "db", "v")
    ]
    assert kinds(cat, "DROP TABLE IF EXISTS nope, v, `t`", 8) == [
        (DDLType.DROP_TABLE, "db", "v"),
        (DDLType.DROP_TABLE, "db", "t"),
    ]
    assert cat.tables() == []
    with pytest.raises(SchemaError):
        cat.apply_ddl("DROP TABLE t", "db", 9)


def test_views_have_no_table_info(cat: SchemaCatalog) -> None:
    evs = cat.apply_ddl(
        "CREATE ALGORITHM=UNDEFINED DEFINER=`root`@`localhost` SQL SECURITY DEFINER VIEW `v` AS select 1",
        "db",
        3,
    )
    assert [(e.ddl_type, e.table, e.table_info) for e in evs] == [(DDLType.CREATE_VIEW, "v", None)]
    assert kinds(cat, "ALTER VIEW v AS SELECT 2", 4) == [(DDLType.OTHER, "db", "v")]
    assert kinds(cat, "DROP VIEW IF EXISTS v, db.w", 5) == [
        (DDLType.DROP_VIEW, "db", "v"),
        (DDLType.DROP_VIEW, "db", "w"),
    ]
    assert cat.get("db", "v") is None


@pytest.mark.parametrize(
    "sql",
    [
        "BEGIN",
        "COMMIT",
        "XA END 'x'",
        "SAVEPOINT a",
        "INSERT INTO t VALUES (1)",
        "DELETE FROM t",
        "FLUSH LOGS",
        "GRANT ALL ON db.* TO u",
        "SET NAMES utf8mb4",
        "ANALYZE TABLE t",
        "OPTIMIZE TABLE t",
    ],
)
def test_non_ddl_changes_nothing(cat: SchemaCatalog, sql: str) -> None:
    before = cat.to_dict()
    assert cat.apply_ddl(sql, "db", 99) == []
    assert cat.to_dict() == before


def test_unknown_table_names_schema_table_and_statement(cat: SchemaCatalog) -> None:
    with pytest.raises(SchemaError) as ei:
        cat.apply_ddl("ALTER TABLE old_one ADD COLUMN x int", "db", 3)
    msg = str(ei.value)
    assert "`db`.`old_one`" in msg and "ALTER TABLE old_one ADD COLUMN x int" in msg
    assert ei.value.code == "CDC:ErrSchemaMismatch"
    for sql in (
        "TRUNCATE old_one",
        "RENAME TABLE old_one TO x",
        "CREATE INDEX i ON old_one (a)",
        "CREATE TABLE y LIKE old_one",
    ):
        with pytest.raises(SchemaError, match="old_one"):
            cat.apply_ddl(sql, "db", 4)
    # IF EXISTS forms are fine
    assert cat.apply_ddl("ALTER TABLE IF EXISTS old_one ADD COLUMN x int", "db", 5) == []
    assert cat.apply_ddl("DROP TABLE IF EXISTS old_one", "db", 6) == []


def test_bad_alters_fail_and_leave_the_catalog_unchanged(cat: SchemaCatalog) -> None:
    before = cat.to_dict()
    for sql in (
        "ALTER TABLE t ADD COLUMN a int",
        "ALTER TABLE t DROP COLUMN nope",
        "ALTER TABLE t ADD COLUMN z int AFTER nope",
        "ALTER TABLE t DROP INDEX nope",
        "ALTER TABLE t ADD PRIMARY KEY (a)",
        "ALTER TABLE t ADD INDEX ka (b)",
        "ALTER TABLE t ADD SYSTEM VERSIONING",
        "ALTER TABLE t CONVERT PARTITION p TO TABLE x",
    ):
        with pytest.raises(SchemaError):
            cat.apply_ddl(sql, "db", 3)
    # a multi-table DROP that fails half way applies nothing
    with pytest.raises(SchemaError):
        cat.apply_ddl("DROP TABLE t, nope", "db", 4)
    assert cat.to_dict() == before
    assert cat.applied_ts == 2


def test_qualified_names_need_no_default_database(cat: SchemaCatalog) -> None:
    assert kinds(cat, "ALTER TABLE `db`.`t` ADD COLUMN c int", 3, db=None) == [
        (DDLType.ALTER_TABLE, "db", "t")
    ]
    with pytest.raises(SchemaError, match="no default database"):
        cat.apply_ddl("ALTER TABLE t ADD COLUMN d int", None, 4)


def test_table_names_are_case_sensitive_columns_and_indexes_are_not(cat: SchemaCatalog) -> None:
    with pytest.raises(SchemaError):
        cat.apply_ddl("ALTER TABLE T ADD COLUMN c int", "db", 3)
    cat.apply_ddl("CREATE TABLE T (X int)", "db", 4)
    assert cat.get("db", "T") is not None and cat.get("db", "t") is not None
    cat.apply_ddl("ALTER TABLE t MODIFY A varchar(20), DROP INDEX KA, ADD INDEX (B)", "db", 5)
    t = cat.get("db", "t")
    assert t is not None and t.column_names == ("id", "A", "b")
    assert t.indexes == (
        IndexInfo("PRIMARY", ("id",), True, True),
        IndexInfo("b", ("b",)),
    )  # named like the column


def test_column_changes_follow_into_indexes(cat: SchemaCatalog) -> None:
    cat.apply_ddl("ALTER TABLE t ADD INDEX kab (a, b)", "db", 3)
    cat.apply_ddl("ALTER TABLE t CHANGE a a2 varchar(10), RENAME COLUMN b TO b2", "db", 4)
    t = cat.get("db", "t")
    assert t is not None and t.indexes[1:] == (IndexInfo("ka", ("a2",)), IndexInfo("kab", ("a2", "b2")))
    cat.apply_ddl("ALTER TABLE t DROP COLUMN a2", "db", 5)
    t = cat.get("db", "t")
    assert t is not None and t.indexes[1:] == (IndexInfo("kab", ("b2",)),)


def test_default_changes(cat: SchemaCatalog) -> None:
    cat.apply_ddl(
        "ALTER TABLE t ALTER COLUMN b SET DEFAULT '7', MODIFY a varchar(10) NOT NULL DEFAULT 'x'", "db", 3
    )
    t = cat.get("db", "t")
    assert t is not None
    assert (t.column("b").default, t.column("a").default, t.column("a").nullable) == ("7", "x", False)
    cat.apply_ddl("ALTER TABLE t ALTER b DROP DEFAULT, ALTER a DROP DEFAULT", "db", 4)
    t = cat.get("db", "t")
    assert t is not None
    # a nullable column still defaults to NULL; a NOT NULL one has no default any more
    assert (t.column("b").default, t.column("b").has_default) == (None, True)
    assert (t.column("a").default, t.column("a").has_default) == (None, False)


def test_primary_key_add_and_drop(cat: SchemaCatalog) -> None:
    cat.apply_ddl("ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, b)", "db", 3)
    t = cat.get("db", "t")
    assert t is not None and t.primary_key == ("id", "b") and not t.column("b").nullable
    cat.apply_ddl("ALTER TABLE t DROP PRIMARY KEY", "db", 4)
    t = cat.get("db", "t")
    assert t is not None and t.primary_key == () and not t.column("b").nullable


def test_convert_upgrades_text_types_and_table_charset(cat: SchemaCatalog) -> None:
    cat.apply_ddl(
        "CREATE TABLE l (a tinytext, b text, c varchar(5), d varbinary(3), e longtext) CHARSET latin1",
        "db",
        3,
    )
    cat.apply_ddl("ALTER TABLE l CONVERT TO CHARACTER SET utf8mb4", "db", 4)
    t = cat.get("db", "l")
    assert t is not None and t.charset == "utf8mb4"
    assert [c.type for c in t.columns] == ["text", "mediumtext", "varchar", "varbinary", "longtext"]
    assert t.column("c").collation == "utf8mb4_general_ci" and t.column("d").charset is None
    cat.apply_ddl("ALTER TABLE l CONVERT TO CHARACTER SET latin1 COLLATE latin1_bin", "db", 5)
    t = cat.get("db", "l")
    assert t is not None and t.column("a").type == "text"  # never downgraded
    assert cat.meta("db", "l") == TableMeta("latin1_bin", {})
    cat.apply_ddl("ALTER TABLE l ADD COLUMN f char(1)", "db", 6)
    assert cat.get("db", "l").column("f").collation == "latin1_bin"  # type: ignore[union-attr]


def test_scope_ignores_other_databases() -> None:
    c = SchemaCatalog(scope=["a"])
    assert c.apply_ddl("CREATE DATABASE b", None, 1) == []
    assert c.apply_ddl("CREATE TABLE b.t (x int)", None, 2) == []
    assert c.apply_ddl("ALTER TABLE b.t ADD y int", None, 3) == []
    assert c.apply_ddl("CREATE TABLE mysql.t (x int)", None, 4) == []
    assert c.apply_ddl("CREATE DATABASE a", None, 5)[0].ddl_type == DDLType.CREATE_SCHEMA
    c.apply_ddl("CREATE TABLE a.t (x int)", None, 6)
    evs = c.apply_ddl("RENAME TABLE a.t TO b.t", None, 7)
    assert [(e.schema, e.table, e.old_schema) for e in evs] == [("b", "t", "a")]
    assert c.tables() == []
    with pytest.raises(SchemaError, match=r"`b`\.`t`"):
        c.apply_ddl("RENAME TABLE b.t TO a.t", None, 8)


def test_unknown_database_is_an_error() -> None:
    c = SchemaCatalog()
    with pytest.raises(SchemaError, match="database `nodb` is not known"):
        c.apply_ddl("CREATE TABLE nodb.t (a int)", None, 1)


def test_snapshot_and_dict_round_trip(cat: SchemaCatalog) -> None:
    cat.apply_ddl(
        "CREATE TABLE f (a text, b int, UNIQUE (a), KEY (b)) CHARSET latin1 COLLATE latin1_bin", "db", 3
    )
    d = cat.to_dict()
    again = SchemaCatalog.from_dict(d)
    assert again == cat and again.to_dict() == d
    assert again.meta("db", "f") == cat.meta("db", "f") and again.applied_ts == 3
    snap = cat.snapshot()
    cat.apply_ddl("DROP TABLE f", "db", 4)
    assert snap.get("db", "f") is not None and cat.get("db", "f") is None
    assert snap != cat
    # the restored catalog keeps applying DDL the same way (collation, hash keys)
    snap.apply_ddl("ALTER TABLE f ADD COLUMN c varchar(2), ADD UNIQUE (b)", "db", 4)
    f = snap.get("db", "f")
    assert f is not None and f.column("c").collation == "latin1_bin"
    assert [i.name for i in f.indexes] == ["b_2", "a", "b"]


def test_reconcile_checks_count_names_and_type_family(cat: SchemaCatalog) -> None:
    t = cat.get("db", "t")
    assert t is not None
    reconcile(t, ["ID", "a", "B"], [3, 15, 3])
    reconcile(t, [], [3, 15, 3])  # no names in the binlog: count and types only
    with pytest.raises(SchemaError) as ei:
        reconcile(t, ["id", "a"], [3, 15])
    assert "`db`.`t`" in str(ei.value) and "has 2 columns" in str(ei.value) and "has 3" in str(ei.value)
    with pytest.raises(SchemaError, match="column 3 is 'c' but the tracked schema"):
        reconcile(t, ["id", "a", "c"], [3, 15, 3])
    with pytest.raises(SchemaError, match="column 'b' has binlog type 8"):
        reconcile(t, ["id", "a", "b"], [3, 15, 8])


def test_reconcile_type_codes_for_every_type() -> None:
    c = SchemaCatalog()
    c.apply_ddl("CREATE DATABASE d", None, 1)
    c.apply_ddl(
        "CREATE TABLE x (a tinyint, b smallint, c mediumint, d int, e bigint, f float, g double, h decimal, "
        "i date, j datetime(3), k timestamp, l time, m year, n char(2), o varchar(3), p binary(2), q varbinary(2), "
        "r text, s blob, t json, u bit(3), v enum('a'), w set('a'), x geometry)",
        "d",
        2,
    )
    t = c.get("d", "x")
    assert t is not None
    reconcile(
        t,
        [],
        [1, 2, 9, 3, 8, 4, 5, 246, 10, 18, 17, 19, 13, 254, 15, 254, 15, 252, 252, 252, 16, 247, 248, 255],
    )
    reconcile(
        t,
        [],
        [1, 2, 9, 3, 8, 4, 5, 246, 10, 12, 7, 11, 13, 254, 15, 254, 15, 252, 252, 252, 16, 254, 254, 255],
    )
    with pytest.raises(SchemaError, match="'r'"):
        reconcile(
            t,
            [],
            [1, 2, 9, 3, 8, 4, 5, 246, 10, 12, 7, 11, 13, 254, 15, 254, 15, 15, 252, 252, 16, 254, 254, 255],
        )
