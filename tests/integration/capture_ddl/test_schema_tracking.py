"""The schema tracker against a real MariaDB.

Every DDL is run on the server, applied to a SchemaCatalog loaded before, and
after each statement the tracked shapes must equal what ``SHOW CREATE TABLE``
reports (parsed with ``parse_create_table``), so both the parser and the applier
are proven against the server.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import QueryEvent
from pymysqlreplication.row_event import TableMapEvent

from sparkcdc.capture.catalog import SchemaCatalog, parse_create_table, reconcile
from sparkcdc.capture.ddl import quote_ident
from sparkcdc.capture.schema_history import FileSchemaHistoryStore, SchemaHistory
from sparkcdc.errors import SchemaError
from sparkcdc.model.events import DDLType
from sparkcdc.model.schema import TableInfo
from sparkcdc.services.mariadb import LocalMariaDB

pytestmark = pytest.mark.integration

ALL_TYPES = """
CREATE TABLE all_types (
  id bigint unsigned NOT NULL AUTO_INCREMENT,
  c_tinyint tinyint, c_tinyint_u tinyint unsigned, c_bool bool DEFAULT true, c_smallint smallint zerofill,
  c_mediumint mediumint NOT NULL DEFAULT -7, c_int int(7), c_integer integer unsigned, c_bigint bigint,
  c_decimal decimal(20,6) DEFAULT '3.14159', c_numeric numeric(5), c_dec dec, c_float float DEFAULT 1.5,
  c_float2 float(7,3), c_double double DEFAULT -2.5e-3, c_real real, c_double_p double precision(12,4),
  c_date date DEFAULT '2020-1-2', c_datetime datetime,
  c_datetime6 datetime(6) DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  c_timestamp timestamp NULL, c_timestamp3 timestamp(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  c_time time(1) DEFAULT '12:34:56', c_year year DEFAULT 99,
  c_char char(4) DEFAULT 'ab', c_varchar varchar(255) CHARACTER SET latin1 COLLATE latin1_german1_ci,
  c_charvar character varying(9), c_nchar national char(2), c_bin_attr varchar(5) BINARY,
  c_tinytext tinytext, c_text text, c_mediumtext mediumtext COLLATE utf8mb4_unicode_ci, c_longtext longtext,
  c_binary binary(16), c_varbinary varbinary(200), c_char_binary varchar(7) CHARACTER SET binary,
  c_tinyblob tinyblob, c_blob blob, c_mediumblob mediumblob, c_longblob longblob,
  c_enum enum('a','b''q','c\\\\d') NOT NULL DEFAULT 'b''q', c_set set('x','y','z') DEFAULT 'z,x',
  c_bit bit(5) DEFAULT b'101', c_bit1 bit, c_json json, c_geometry geometry, c_point point,
  c_virtual int AS (c_int * 2) VIRTUAL,
  c_stored bigint GENERATED ALWAYS AS (c_int + 1) STORED,
  c_comment int COMMENT 'a ''quoted'' comment',
  PRIMARY KEY (id), UNIQUE KEY uk_char (c_char), KEY idx_multi (c_int, c_varchar(10)), FULLTEXT KEY ft (c_text)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='all types'
"""

A = DDLType.ALTER_TABLE


def _statements(d: str, d2: str) -> list[tuple[str, str | None, list[tuple[DDLType, str, str]] | None]]:
    """(sql, default database, expected [(ddl_type, schema, table)] or None)."""
    return [
        (f"CREATE DATABASE {d2} CHARACTER SET latin1", d, [(DDLType.CREATE_SCHEMA, d2, "")]),
        (ALL_TYPES, d, [(DDLType.CREATE_TABLE, d, "all_types")]),
        ("CREATE TABLE no_pk (a int, b varchar(10) DEFAULT 'x', c text) CHARSET latin1", d, None),
        (
            "CREATE TABLE only_uk (a int NOT NULL, b varchar(20) NOT NULL, c int, UNIQUE KEY uk_ab (a, b))",
            d,
            None,
        ),
        (
            "CREATE TABLE `odd ``name` (`Col A` int PRIMARY KEY, `col``b` varchar(3) DEFAULT 'x', KEY (`col``b`))",
            d,
            [(DDLType.CREATE_TABLE, d, "odd `name")],
        ),
        # columns
        (
            "ALTER TABLE all_types ADD COLUMN n1 int NOT NULL DEFAULT 5 AFTER c_int, ADD n2 varchar(10) FIRST",
            d,
            [(A, d, "all_types")],
        ),
        (
            "ALTER TABLE all_types ADD (n3 decimal(8,3) DEFAULT 1.5, n4 set('a','b') DEFAULT 'b,a', INDEX idx_n3 (n3))",
            d,
            None,
        ),
        ("ALTER TABLE all_types DROP COLUMN n2, DROP COLUMN IF EXISTS nope", d, [(A, d, "all_types")]),
        ("ALTER TABLE all_types MODIFY n1 bigint unsigned", d, [(A, d, "all_types")]),
        ("ALTER TABLE all_types MODIFY COLUMN c_char char(4) NOT NULL DEFAULT 'zz' FIRST", d, None),
        ("ALTER TABLE all_types CHANGE n3 n3_renamed double(10,2) NOT NULL AFTER id", d, None),
        ("ALTER TABLE all_types CHANGE COLUMN `n3_renamed` `N3` double(10,2)", d, None),
        ("ALTER TABLE all_types RENAME COLUMN n4 TO n4_new", d, [(A, d, "all_types")]),
        ("ALTER TABLE all_types ALTER COLUMN n1 SET DEFAULT 42, ALTER c_text SET DEFAULT 'hello'", d, None),
        ("ALTER TABLE all_types ALTER n1 DROP DEFAULT", d, None),
        ("ALTER TABLE all_types ALTER COLUMN c_tinyint DROP DEFAULT", d, None),
        (
            "ALTER TABLE all_types ADD COLUMN j2 JSON NOT NULL, ADD COLUMN dt datetime(2) DEFAULT '2021-02-03 04:05:06.789'",
            d,
            None,
        ),
        ("ALTER TABLE all_types MODIFY c_json longtext", d, None),
        (
            "ALTER TABLE all_types ADD COLUMN IF NOT EXISTS n1 int, ADD COLUMN IF NOT EXISTS n5 tinyint(1) DEFAULT 0",
            d,
            None,
        ),
        # indexes
        ("ALTER TABLE all_types ADD INDEX idx_dt (dt)", d, [(DDLType.ADD_INDEX, d, "all_types")]),
        (
            "ALTER TABLE all_types ADD UNIQUE KEY (c_integer), ADD KEY (c_bigint, c_int)",
            d,
            [(A, d, "all_types")],
        ),
        ("ALTER TABLE all_types DROP INDEX idx_dt", d, [(DDLType.DROP_INDEX, d, "all_types")]),
        ("ALTER TABLE all_types RENAME INDEX idx_multi TO idx_multi2", d, [(A, d, "all_types")]),
        ("CREATE INDEX ci ON all_types (c_date)", d, [(DDLType.ADD_INDEX, d, "all_types")]),
        ("CREATE UNIQUE INDEX cu ON all_types (c_date, c_time)", d, [(DDLType.ADD_INDEX, d, "all_types")]),
        ("DROP INDEX ci ON all_types", d, [(DDLType.DROP_INDEX, d, "all_types")]),
        ("ALTER TABLE all_types DROP INDEX cu, DROP COLUMN c_time, DROP COLUMN c_varchar", d, None),
        ("ALTER TABLE no_pk ADD PRIMARY KEY (a)", d, [(DDLType.ADD_INDEX, d, "no_pk")]),
        ("ALTER TABLE no_pk DROP PRIMARY KEY", d, [(DDLType.DROP_INDEX, d, "no_pk")]),
        ("ALTER TABLE no_pk ADD UNIQUE (b), ADD COLUMN d int NOT NULL", d, None),
        ("ALTER TABLE only_uk DROP INDEX uk_ab, ADD UNIQUE KEY uk_c (c)", d, None),
        ("ALTER TABLE only_uk ADD CONSTRAINT pk PRIMARY KEY (a, b)", d, [(DDLType.ADD_INDEX, d, "only_uk")]),
        ("ALTER TABLE `odd ``name` ADD INDEX `idx ``x`` y` (`Col A`, `col``b`)", d, None),
        # table options and charsets
        ("ALTER TABLE all_types ENGINE=InnoDB, COMMENT='changed'", d, [(A, d, "all_types")]),
        (
            "ALTER TABLE all_types ALGORITHM=INPLACE, ADD INDEX idx_b (c_bigint)",
            d,
            [(DDLType.ADD_INDEX, d, "all_types")],
        ),
        ("ALTER TABLE no_pk CONVERT TO CHARACTER SET utf8mb4", d, None),
        ("ALTER TABLE no_pk DEFAULT CHARSET=latin1 COLLATE latin1_bin", d, None),
        ("ALTER TABLE no_pk ADD COLUMN e varchar(4), ADD COLUMN f tinytext", d, None),
        ("ALTER TABLE no_pk CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", d, None),
        ("ALTER TABLE no_pk COLLATE latin1_general_ci", d, None),
        # renames, across databases too
        ("ALTER TABLE no_pk RENAME TO no_pk_r", d, [(DDLType.RENAME_TABLE, d, "no_pk_r")]),
        (f"RENAME TABLE no_pk_r TO {d2}.no_pk2", d, [(DDLType.RENAME_TABLE, d2, "no_pk2")]),
        (f"ALTER TABLE {d2}.no_pk2 ADD COLUMN g varchar(5)", d, [(A, d2, "no_pk2")]),
        (
            "CREATE TABLE l1 (a varchar(5), b text, c enum('p') DEFAULT 'p')",
            d2,
            [(DDLType.CREATE_TABLE, d2, "l1")],
        ),
        (
            f"RENAME TABLE {d2}.no_pk2 TO no_pk, only_uk TO {d2}.only_uk",
            d,
            [(DDLType.RENAME_TABLE, d, "no_pk"), (DDLType.RENAME_TABLE, d2, "only_uk")],
        ),
        (f"ALTER TABLE {d2}.only_uk ADD COLUMN h char(2), RENAME TO {d}.only_uk", d, [(A, d, "only_uk")]),
        (
            "RENAME TABLE no_pk TO swap_tmp, only_uk TO no_pk, swap_tmp TO only_uk",
            d,
            [
                (DDLType.RENAME_TABLE, d, "swap_tmp"),
                (DDLType.RENAME_TABLE, d, "no_pk"),
                (DDLType.RENAME_TABLE, d, "only_uk"),
            ],
        ),
        (
            f"ALTER DATABASE {d2} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
            d,
            [(DDLType.ALTER_SCHEMA, d2, "")],
        ),
        (f"CREATE TABLE {d2}.u1 (a varchar(5) PRIMARY KEY, b text)", d, None),
        # like, if not exists, or replace, truncate, drop and re-create
        ("CREATE TABLE copy_types LIKE all_types", d, [(DDLType.CREATE_TABLE, d, "copy_types")]),
        ("CREATE TABLE IF NOT EXISTS copy_types (a int)", d, []),
        (
            "CREATE OR REPLACE TABLE copy_types (x int, y varchar(2))",
            d,
            [(DDLType.CREATE_TABLE, d, "copy_types")],
        ),
        ("TRUNCATE TABLE copy_types", d, [(DDLType.TRUNCATE_TABLE, d, "copy_types")]),
        ("TRUNCATE copy_types", d, [(DDLType.TRUNCATE_TABLE, d, "copy_types")]),
        (
            f"DROP TABLE copy_types, {d2}.l1",
            d,
            [(DDLType.DROP_TABLE, d, "copy_types"), (DDLType.DROP_TABLE, d2, "l1")],
        ),
        ("DROP TABLE IF EXISTS nope, only_uk", d, [(DDLType.DROP_TABLE, d, "only_uk")]),
        ("CREATE TABLE only_uk (z bigint NOT NULL, UNIQUE (z))", d, [(DDLType.CREATE_TABLE, d, "only_uk")]),
        # foreign keys: the server creates an index for each and drops it when another index covers it
        (
            "CREATE TABLE fk_parent (id int PRIMARY KEY, code varchar(10) NOT NULL, UNIQUE KEY (code))",
            d,
            None,
        ),
        (
            "CREATE TABLE fk_child (id int, pid int, code varchar(10) NOT NULL, y int REFERENCES fk_parent (id), "
            "CONSTRAINT fk_p FOREIGN KEY (pid) REFERENCES fk_parent (id) ON DELETE CASCADE, "
            "FOREIGN KEY (code) REFERENCES fk_parent (code), KEY (pid, id), CONSTRAINT cc CHECK (pid > 0))",
            d,
            [(DDLType.CREATE_TABLE, d, "fk_child")],
        ),
        (
            "ALTER TABLE fk_child ADD COLUMN pid2 int, ADD CONSTRAINT fk2 FOREIGN KEY (pid2) REFERENCES fk_parent (id)",
            d,
            None,
        ),
        (
            "ALTER TABLE fk_child ADD FOREIGN KEY (id) REFERENCES fk_parent (id)",
            d,
            [(DDLType.ADD_INDEX, d, "fk_child")],
        ),
        ("ALTER TABLE fk_child DROP FOREIGN KEY fk2", d, [(DDLType.DROP_INDEX, d, "fk_child")]),
        ("ALTER TABLE fk_child ADD PRIMARY KEY (id)", d, None),
        ("ALTER TABLE fk_child ADD KEY (pid2, id), ADD INDEX (y, code)", d, None),
        ("ALTER TABLE fk_child ADD CONSTRAINT chk CHECK (id > 0)", d, [(A, d, "fk_child")]),
        ("ALTER TABLE fk_child DROP CONSTRAINT chk", d, [(A, d, "fk_child")]),
        # charsets given as aliases, and table options in the same ALTER as new columns
        (
            "CREATE TABLE cs (a varchar(10) CHARSET utf8, b varchar(10) COLLATE utf8_bin, "
            "c enum('x','y') CHARSET latin1 DEFAULT 'y', e char(3) ASCII) CHARACTER SET = utf8 COLLATE = utf8_unicode_ci",
            d,
            None,
        ),
        ("ALTER TABLE cs ADD COLUMN g text, CHARACTER SET = latin1", d, None),
        ("ALTER TABLE cs MODIFY a varchar(10) CHARACTER SET utf8 COLLATE utf8_bin", d, None),
        # defaults the server rewrites
        (
            "CREATE TABLE dflt (a char(36) DEFAULT (uuid()), b int DEFAULT (1 + 1), c datetime DEFAULT CURRENT_TIMESTAMP, "
            "d timestamp(2) NULL DEFAULT CURRENT_TIMESTAMP(2), e varchar(20) DEFAULT (concat('a', 'b')), f int DEFAULT (-5), "
            "g bigint DEFAULT 0x10, h varchar(4) DEFAULT x'4142', i time DEFAULT 123456, j datetime DEFAULT 20200102030405, "
            "k date DEFAULT 20200102, l year DEFAULT '05', n double DEFAULT (1.5), o tinyint DEFAULT -128, "
            "p decimal(5,2) DEFAULT 123.456, q float DEFAULT 1e-20, r varchar(3) DEFAULT 1.5, s double DEFAULT 1e16, "
            "t float DEFAULT 16777217, u set('a','b','c') DEFAULT 'c,a,c', v enum('x','y') DEFAULT 'Y', w bit(4) DEFAULT 9)",
            d,
            None,
        ),
        # long unique keys (hash), prefix keys and NOT NULL changes reorder keys
        (
            "CREATE TABLE uniq (a text, b varchar(2000), c blob, d varchar(10), "
            "UNIQUE (a), UNIQUE (b), UNIQUE KEY (c(10)), UNIQUE (d DESC))",
            d,
            None,
        ),
        ("ALTER TABLE uniq ADD UNIQUE KEY ua (a(20)), MODIFY d varchar(10) NOT NULL", d, None),
        # names: tables are case-sensitive, columns and indexes are not
        ("CREATE TABLE CaseT (A int, Bb int)", d, [(DDLType.CREATE_TABLE, d, "CaseT")]),
        ("CREATE TABLE caset (x int)", d, [(DDLType.CREATE_TABLE, d, "caset")]),
        ("ALTER TABLE CaseT ADD INDEX (a), ADD INDEX IdxB (bb)", d, None),
        ("ALTER TABLE CaseT CHANGE a Aa int", d, None),
        ("ALTER TABLE CaseT DROP INDEX idxb, RENAME INDEX A TO a2", d, None),
        ("ALTER TABLE CaseT ADD INDEX IF NOT EXISTS a2 (bb), DROP INDEX IF EXISTS nope", d, None),
        # partitions
        ("CREATE TABLE parts (a int NOT NULL, b int) PARTITION BY HASH (a) PARTITIONS 2", d, None),
        ("ALTER TABLE parts COALESCE PARTITION 1", d, [(A, d, "parts")]),
        ("ALTER TABLE parts REMOVE PARTITIONING", d, None),
        (
            "ALTER TABLE parts PARTITION BY RANGE (a) (PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN MAXVALUE)",
            d,
            None,
        ),
        # comments and executable comments
        ("/* leading */ ALTER TABLE parts /*!40101 ADD COLUMN c int */ -- trailing\n", d, [(A, d, "parts")]),
        (
            "ALTER TABLE parts ADD COLUMN `d d` int /* inner */ DEFAULT 1 # hash comment\n, ADD COLUMN e int",
            d,
            None,
        ),
        # views
        ("CREATE VIEW v1 AS SELECT a FROM parts", d, [(DDLType.CREATE_VIEW, d, "v1")]),
        ("CREATE OR REPLACE VIEW v1 AS SELECT b FROM parts", d, [(DDLType.CREATE_VIEW, d, "v1")]),
        ("DROP VIEW v1", d, [(DDLType.DROP_VIEW, d, "v1")]),
        # not DDL
        ("INSERT INTO parts (a, b) VALUES (1, 2)", d, []),
        ("UPDATE parts SET b = 3", d, []),
        ("DELETE FROM parts", d, []),
        ("BEGIN", d, []),
        ("COMMIT", d, []),
        ("SET @x = 1", d, []),
        ("FLUSH TABLES", d, []),
        (f"DROP DATABASE {d2}", d, [(DDLType.DROP_SCHEMA, d2, "")]),
    ]


class _Tracker:
    """Runs statements on the server and on a catalog, and compares them after each one."""

    def __init__(self, mariadb: LocalMariaDB, dbs: list[str]) -> None:
        self.conn = mariadb.connect()
        self.dbs = dbs
        self.cat = SchemaCatalog.load_from_upstream(self.conn, [d for d in dbs if self._exists(d)], version=1)
        self.cat.scope = frozenset(dbs)
        self.ts = 1000

    def _exists(self, db: str) -> bool:
        with self.conn.cursor() as cur:
            cur.execute("SHOW DATABASES LIKE %s", (db,))
            return cur.fetchone() is not None

    def run(self, sql: str, default_db: str | None) -> list[Any]:
        with self.conn.cursor() as cur:
            if default_db is not None:
                cur.execute(f"USE {quote_ident(default_db)}")
            try:
                cur.execute(sql)
            except pymysql.MySQLError as e:
                raise AssertionError(f"the server refused {sql!r}: {e}") from e
        self.ts += 1
        return self.cat.apply_ddl(sql, default_db, self.ts)

    def server_state(self) -> SchemaCatalog:
        existing = [d for d in self.dbs if self._exists(d)]
        return SchemaCatalog.load_from_upstream(self.conn, existing)

    def assert_in_sync(self, sql: str) -> None:
        server = self.server_state()
        assert self.cat.databases() == server.databases(), sql
        mine = {(t.schema, t.table): t for t in self.cat.tables()}
        theirs = {(t.schema, t.table): t for t in server.tables()}
        assert sorted(mine) == sorted(theirs), sql
        for key, info in theirs.items():
            got = mine[key].with_version(0)
            assert got == info, f"after {sql!r}: {key} differs\n{_diff(info, got)}"
            assert self.cat.meta(*key).collation == server.meta(*key).collation, (sql, key)  # type: ignore[union-attr]
        for d in server.databases():
            assert self.cat.database_charset(d) == server.database_charset(d), (sql, d)

    def close(self) -> None:
        self.conn.close()


def _diff(want: TableInfo, got: TableInfo) -> str:
    lines = []
    for a, b in zip(want.columns, got.columns, strict=False):
        if a != b:
            lines.append(f"  server: {a}\n  mine:   {b}")
    if len(want.columns) != len(got.columns):
        lines.append(f"  columns server={want.column_names} mine={got.column_names}")
    if want.indexes != got.indexes:
        lines.append(f"  indexes server={want.indexes}\n          mine={got.indexes}")
    if (want.charset, want.partitioned) != (got.charset, got.partitioned):
        lines.append(f"  table server={want.charset, want.partitioned} mine={got.charset, got.partitioned}")
    return "\n".join(lines)


@pytest.fixture()
def second_db(mariadb: LocalMariaDB, fresh_db: str) -> Iterator[str]:
    """A second database name for cross-database renames (created by the test's DDL)."""
    name = fresh_db[:40] + "_b"
    mariadb.execute(f"DROP DATABASE IF EXISTS {quote_ident(name)}")
    yield name
    mariadb.execute(f"DROP DATABASE IF EXISTS {quote_ident(name)}")


def test_every_ddl_keeps_the_catalog_equal_to_show_create_table(
    mariadb: LocalMariaDB, fresh_db: str, second_db: str
) -> None:
    mariadb.execute("CREATE TABLE preexisting (id int PRIMARY KEY, v varchar(10))", database=fresh_db)
    tr = _Tracker(mariadb, [fresh_db, second_db])
    try:
        assert tr.cat.get(fresh_db, "preexisting") is not None
        tr.assert_in_sync("load")
        for sql, default_db, expected in _statements(fresh_db, second_db):
            events = tr.run(sql, default_db)
            if expected is not None:
                assert [(e.ddl_type, e.schema, e.table) for e in events] == expected, sql
            for e in events:
                assert e.commit_ts == tr.ts and e.table_version == tr.ts and e.query == sql
                if e.table_info is not None:
                    assert e.table_info.version == tr.ts
                    assert (e.table_info.schema, e.table_info.table) == (e.schema, e.table)
            if len(events) == 1 and events[0].table_info is not None:
                e = events[0]
                assert tr.cat.get(e.schema, e.table) == e.table_info
                if e.old_table is not None:
                    assert tr.cat.get(e.old_schema, e.old_table) is None  # type: ignore[arg-type]
            tr.assert_in_sync(sql)
        # facts the equality above relies on, spelled out for the tricky types
        t = tr.cat.get(fresh_db, "all_types")
        assert t is not None
        assert t.column("c_bool").type == "tinyint" and t.column("c_bool").length == 1
        assert t.column("c_bool").default == "1"
        assert t.column("c_json").type == "longtext" and t.column("j2").type == "json"
        assert t.column("c_char_binary").type == "varbinary" and t.column("c_char_binary").charset is None
        assert t.column("c_bin_attr").collation == "utf8mb4_bin"
        assert t.column("c_enum").elements == ("a", "b'q", "c\\d") and t.column("c_enum").default == "b'q"
        assert t.column("c_set").default == "x,z"
        assert t.column("c_year").default == "1999"
        assert t.column("c_date").default == "2020-01-02"
        assert (
            t.column("c_timestamp3").default == "CURRENT_TIMESTAMP(3)"
            and not t.column("c_timestamp3").nullable
        )
        assert t.column("c_smallint").zerofill and t.column("c_smallint").unsigned
        assert t.column("c_virtual").generated and not t.column("c_virtual").has_default
        assert t.column("N3").name == "N3" and t.column_names[:3] == ("c_char", "id", "N3")
        assert t.primary_key == ("id",)
        pk_less = tr.cat.get(fresh_db, "only_uk")
        assert pk_less is not None and pk_less.primary_key == () and pk_less.handle_key == ("z",)
        assert tr.cat.databases() == {fresh_db}
    finally:
        tr.close()


def test_unknown_table_is_a_loud_error(mariadb: LocalMariaDB, fresh_db: str) -> None:
    conn = mariadb.connect(fresh_db)
    try:
        cat = SchemaCatalog.load_from_upstream(conn, [fresh_db])
        mariadb.execute("CREATE TABLE later (a int)", database=fresh_db)  # not applied to the catalog
        with pytest.raises(SchemaError) as ei:
            cat.apply_ddl("ALTER TABLE later ADD COLUMN b int", fresh_db, 5)
        assert f"`{fresh_db}`.`later`" in str(ei.value) and "ALTER TABLE later ADD COLUMN b int" in str(
            ei.value
        )
    finally:
        conn.close()


def test_binlog_query_events_rebuild_history_that_matches_table_maps(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """Apply the DDL exactly as the binlog carries it and reconcile every table map with the history."""
    conn = mariadb.connect(fresh_db)
    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        log_file, log_pos = cur.fetchone()[:2]
    cat = SchemaCatalog.load_from_upstream(conn, [fresh_db], version=1)
    store = FileSchemaHistoryStore(tmp_path / "history.jsonl")
    history = SchemaHistory.open(store)
    history.bootstrap(cat, 1)
    script = [
        "CREATE TABLE t1 (id int PRIMARY KEY, a varchar(10), j json, e enum('x','y'), s set('p','q'), b bit(3))",
        "INSERT INTO t1 VALUES (1, 'a', '{}', 'x', 'p', b'1')",
        "ALTER TABLE t1 ADD COLUMN c decimal(10,2) AFTER a, DROP COLUMN s",
        "INSERT INTO t1 (id, a, c) VALUES (2, 'b', 1.5)",
        "CREATE TABLE t2 (x datetime(3), y timestamp(6) NULL, z time, w year, f float, d double, g geometry)",
        "INSERT INTO t2 (x) VALUES (NOW(3))",
        "RENAME TABLE t1 TO t1_old, t2 TO t1",
        "INSERT INTO t1 (x) VALUES (NOW(3))",
        "DROP TABLE t1_old",
        "CREATE TABLE t3 (k int) /* trailing comment */",
        "INSERT INTO t3 VALUES (1)",
        "DROP TABLE IF EXISTS t3, nope",
    ]
    for sql in script:
        mariadb.execute(sql, database=fresh_db)
    stream = BinLogStreamReader(
        connection_settings={
            "host": mariadb.host,
            "port": mariadb.port,
            "user": mariadb.user,
            "password": "",
        },
        server_id=200000 + os.getpid() % 100000,
        log_file=log_file,
        log_pos=log_pos,
        resume_stream=True,
        blocking=False,
        only_events=[QueryEvent, TableMapEvent],
    )
    ts = 1
    ddl_queries: list[str] = []
    rename_ts = 0
    maps = 0
    try:
        for ev in stream:
            ts += 1
            if isinstance(ev, QueryEvent):
                schema = ev.schema.decode() if isinstance(ev.schema, bytes) else ev.schema
                events = history.apply(cat, ev.query, schema or None, ts)
                if events:
                    ddl_queries.append(ev.query)
                if ev.query.startswith("RENAME TABLE"):
                    rename_ts = ts
            elif isinstance(ev, TableMapEvent) and ev.schema == fresh_db:
                info = history.at(ev.schema, ev.table, ts)
                assert info is not None and info == cat.get(ev.schema, ev.table)
                names = list(ev.optional_metadata.column_name_list)
                types = [c.type for c in ev.columns]
                reconcile(info, names, types)
                maps += 1
                with pytest.raises(SchemaError, match="columns"):
                    reconcile(info, names[:-1], types[:-1])
                with pytest.raises(SchemaError, match="column 1 is 'zz'"):
                    reconcile(info, ["zz", *names[1:]], types)
                if rename_ts and ev.table == "t1":
                    # the shape t1 had before the rename does not fit the rows written after it
                    before = history.at(fresh_db, "t1", rename_ts - 1)
                    assert before is not None and before.column_names[0] == "id"
                    with pytest.raises(SchemaError):
                        reconcile(before, names, types)
    finally:
        stream.close()
        conn.close()
    assert maps == 5 and rename_ts > 0
    assert any("generated by server" in q for q in ddl_queries)  # DROP TABLE as the binlog writes it
    final = SchemaCatalog.load_from_upstream(mariadb.connect(fresh_db), [fresh_db])
    assert [t.with_version(0) for t in cat.tables()] == final.tables()
    # a new process replays the history file and sees the same versions and the same catalog
    again = SchemaHistory.open(FileSchemaHistoryStore(tmp_path / "history.jsonl"))
    for t in ("t1", "t1_old", "t2", "t3"):
        assert again.versions(fresh_db, t) == history.versions(fresh_db, t)
    assert again.catalog_at(ts) == history.catalog_at(ts)
    assert [t.with_version(0) for t in again.catalog_at(ts).tables()] == final.tables()
    assert again.at(fresh_db, "t3", ts) is None and again.at(fresh_db, "t1_old", ts) is None


def test_parser_reads_user_ddl_and_show_create_table_alike(mariadb: LocalMariaDB, fresh_db: str) -> None:
    """The same table parsed from the user's CREATE TABLE and from SHOW CREATE TABLE is equal."""
    mariadb.execute(ALL_TYPES, database=fresh_db)
    shown = mariadb.query("SHOW CREATE TABLE all_types", database=fresh_db)[0][1]
    assert "CHECK (json_valid(`c_json`))" in shown
    assert parse_create_table(ALL_TYPES, fresh_db, 7) == parse_create_table(shown, fresh_db, 7)
