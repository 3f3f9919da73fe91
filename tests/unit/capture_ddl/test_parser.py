"""parse_create_table and the DDL tokenizer: edge cases, with values MariaDB 10.11 reports."""

from __future__ import annotations

import pytest

from sparkcdc.capture.catalog import parse_create_table
from sparkcdc.capture.ddl import (
    AlterTable,
    CreateTable,
    DropTable,
    Ignored,
    first_word,
    format_real,
    parse_statement,
    tokenize,
)
from sparkcdc.errors import SchemaError
from sparkcdc.model.schema import ColumnInfo, IndexInfo


def col(sql_cols: str, name: str = "c", **table_opts: str) -> ColumnInfo:
    opts = " ".join(f"{k}={v}" for k, v in table_opts.items())
    return parse_create_table(f"CREATE TABLE t ({sql_cols}) {opts}", "db").column(name)


@pytest.mark.parametrize(
    ("ddl", "type_", "length", "unsigned"),
    [
        ("c BOOL", "tinyint", 1, False),
        ("c BOOLEAN", "tinyint", 1, False),
        ("c INTEGER", "int", 11, False),
        ("c INT UNSIGNED", "int", 10, False or True),
        ("c TINYINT", "tinyint", 4, False),
        ("c SMALLINT UNSIGNED", "smallint", 5, True),
        ("c MEDIUMINT ZEROFILL", "mediumint", 8, True),
        ("c BIGINT", "bigint", 20, False),
        ("c INT(5)", "int", 5, False),
        ("c INT1", "tinyint", 4, False),
        ("c INT8", "bigint", 20, False),
        ("c MIDDLEINT", "mediumint", 9, False),
        ("c YEAR", "year", 4, False),
        ("c BIT", "bit", 1, False),
        ("c BIT(12)", "bit", 12, False),
        ("c CHAR", "char", 1, False),
        ("c CHARACTER VARYING(7)", "varchar", 7, False),
        ("c BINARY", "binary", 1, False),
        ("c VARBINARY(9)", "varbinary", 9, False),
    ],
)
def test_integer_and_string_types(ddl: str, type_: str, length: int, unsigned: bool) -> None:
    c = col(ddl)
    assert (c.type, c.length, c.unsigned) == (type_, length, unsigned)


def test_zerofill_implies_unsigned_and_shows_in_full_type() -> None:
    c = col("c INT ZEROFILL")
    assert c.unsigned and c.zerofill and c.full_type() == "int(10) unsigned zerofill"


@pytest.mark.parametrize(
    ("ddl", "type_", "precision", "scale"),
    [
        ("c DECIMAL", "decimal", 10, 0),
        ("c DEC(5,2)", "decimal", 5, 2),
        ("c NUMERIC(7)", "decimal", 7, 0),
        ("c FIXED(4,1)", "decimal", 4, 1),
        ("c FLOAT", "float", None, None),
        ("c FLOAT(7,3)", "float", 7, 3),
        ("c FLOAT(20)", "float", None, None),
        ("c FLOAT(30)", "double", None, None),
        ("c REAL", "double", None, None),
        ("c DOUBLE PRECISION", "double", None, None),
        ("c DOUBLE(10,0)", "double", 10, 0),
        ("c FLOAT4", "float", None, None),
        ("c FLOAT8", "double", None, None),
    ],
)
def test_numeric_types(ddl: str, type_: str, precision: int | None, scale: int | None) -> None:
    c = col(ddl)
    assert (c.type, c.precision, c.scale) == (type_, precision, scale)


@pytest.mark.parametrize(
    ("ddl", "type_", "fsp"),
    [
        ("c DATETIME", "datetime", 0),
        ("c DATETIME(3)", "datetime", 3),
        ("c TIMESTAMP(6) NULL", "timestamp", 6),
        ("c TIME(2)", "time", 2),
        ("c DATE", "date", 0),
    ],
)
def test_temporal_fsp(ddl: str, type_: str, fsp: int) -> None:
    c = col(ddl)
    assert (c.type, c.fsp) == (type_, fsp)


def test_charset_inheritance_table_then_schema_then_utf8mb4() -> None:
    assert (col("c varchar(3)").charset, col("c varchar(3)").collation) == ("utf8mb4", "utf8mb4_general_ci")
    c = col("c varchar(3)", CHARSET="latin1")
    assert (c.charset, c.collation) == ("latin1", "latin1_swedish_ci")
    c = col("c text", CHARSET="utf8mb4", COLLATE="utf8mb4_bin")
    assert (c.charset, c.collation) == ("utf8mb4", "utf8mb4_bin")
    # a column charset without a collation takes the charset's default, not the table's collation
    c = col("c varchar(3) CHARSET utf8mb4", CHARSET="utf8mb4", COLLATE="utf8mb4_bin")
    assert c.collation == "utf8mb4_general_ci"
    t = parse_create_table("CREATE TABLE t (c char(2))", "db", default_charset="latin1")
    assert (t.column("c").charset, t.column("c").collation, t.charset) == (
        "latin1",
        "latin1_swedish_ci",
        "latin1",
    )
    c = col("c char(2) COLLATE utf8_bin")
    assert (c.charset, c.collation) == ("utf8mb3", "utf8mb3_bin")
    assert col("c national char(2)").charset == "utf8mb3"
    assert col("c char(2) ASCII").charset == "latin1"
    assert col("c int").charset is None


def test_binary_charset_makes_binary_types_but_binary_attribute_only_picks_bin_collation() -> None:
    assert (
        col("c varchar(20) CHARACTER SET binary").type,
        col("c varchar(20) CHARACTER SET binary").charset,
    ) == (
        "varbinary",
        None,
    )
    assert col("c text CHARSET binary").type == "blob"
    assert col("c char(5) BYTE").type == "binary"
    c = col("c char(10) BINARY", CHARSET="latin1")
    assert (c.type, c.charset, c.collation) == ("char", "latin1", "latin1_bin")


def test_text_length_picks_the_text_type_by_bytes() -> None:
    assert col("c text(100)").type == "text"  # 400 bytes in utf8mb4
    assert col("c text(100)", CHARSET="latin1").type == "tinytext"
    assert col("c text(70000)").type == "mediumtext"
    assert col("c blob(70000)").type == "mediumblob"
    assert col("c long").type == "mediumtext" and col("c long varbinary").type == "mediumblob"


def test_json_and_mariadb_show_create_form_of_json() -> None:
    user = col("c JSON")
    assert (user.type, user.charset, user.collation) == ("json", "utf8mb4", "utf8mb4_bin")
    shown = col(
        "`c` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL CHECK (json_valid(`c`))",
        CHARSET="latin1",
    )
    assert shown == user
    # a CHECK on another column is not the JSON marker
    assert col("c longtext CHECK (json_valid(d)), d int").type == "longtext"


def test_enum_set_elements_unescaped_and_defaults_normalised() -> None:
    c = col(r"c enum('a','b''c','d\\e', 'x\'y') NOT NULL DEFAULT 'B''C'")
    assert c.elements == ("a", "b'c", "d\\e", "x'y")
    assert c.default == "b'c" and not c.nullable and c.has_default
    s = col("c set('x','y','z') DEFAULT 'z,x,z'")
    assert s.default == "x,z"


@pytest.mark.parametrize(
    ("ddl", "default"),
    [
        ("c int DEFAULT '5'", "5"),
        ("c tinyint(1) DEFAULT true", "1"),
        ("c int DEFAULT -3", "-3"),
        ("c int DEFAULT (-5)", "-5"),
        ("c decimal(5,2) DEFAULT 1", "1.00"),
        ("c decimal(10,3) DEFAULT 1.23456", "1.235"),
        ("c decimal(65,30) DEFAULT 1.5", "1.500000000000000000000000000000"),
        ("c decimal(5,2) DEFAULT -0", "0.00"),
        ("c double DEFAULT 1e20", "1e20"),
        ("c double DEFAULT -1e10", "-10000000000"),
        ("c double DEFAULT 1e-5", "0.00001"),
        ("c double DEFAULT 1e-300", "1e-300"),
        ("c double DEFAULT 123456789012345678", "1.2345678901234568e17"),
        ("c double DEFAULT -0.0", "0"),
        ("c float DEFAULT 3.3", "3.3"),
        ("c float DEFAULT 16777217", "16777200"),
        ("c float DEFAULT 1e-7", "0.0000001"),
        ("c float(5,1) DEFAULT 2.25", "2.2"),
        ("c double(20,10) DEFAULT 1e-7", "0.0000001000"),
        ("c datetime DEFAULT '2020-1-2'", "2020-01-02 00:00:00"),
        ("c datetime(3) DEFAULT '2020-01-02 03:04:05.5'", "2020-01-02 03:04:05.500"),
        ("c datetime(2) DEFAULT '2021-02-03 04:05:06.789'", "2021-02-03 04:05:06.78"),
        ("c datetime DEFAULT 20200102030405", "2020-01-02 03:04:05"),
        ("c date DEFAULT 20200102", "2020-01-02"),
        ("c time DEFAULT '1:2:3'", "01:02:03"),
        ("c time DEFAULT 123456", "12:34:56"),
        ("c time(3) DEFAULT '10:00:00.1'", "10:00:00.100"),
        ("c year DEFAULT 95", "1995"),
        ("c year DEFAULT '05'", "2005"),
        ("c bit(1) DEFAULT 1", "b'1'"),
        ("c bit(10) DEFAULT 1023", "b'1111111111'"),
        ("c bit(8) DEFAULT b'0'", "b'0'"),
        ("c bigint DEFAULT 0x10", "16"),
        ("c varchar(4) DEFAULT x'4142'", "AB"),
        ("c char(3) DEFAULT 123", "123"),
        ("c varchar(5) DEFAULT _utf8mb4'ab'", "ab"),
        ("c varchar(10) DEFAULT 'a\\nb''c\"'", "a\nb'c\""),
        ("c datetime DEFAULT CURRENT_TIMESTAMP", "CURRENT_TIMESTAMP"),
        ("c datetime DEFAULT current_timestamp()", "CURRENT_TIMESTAMP"),
        ("c datetime(2) DEFAULT now(2)", "CURRENT_TIMESTAMP(2)"),
        ("c timestamp NULL DEFAULT localtimestamp", "CURRENT_TIMESTAMP"),
        ("c int DEFAULT (1+1)", "1+1"),
        ("c int DEFAULT (1 + 1)", "1+1"),
        ("c char(36) DEFAULT uuid()", "uuid()"),
        ("c char(36) DEFAULT (UUID())", "uuid()"),
    ],
)
def test_default_values_as_the_server_prints_them(ddl: str, default: str) -> None:
    c = col(ddl)
    assert c.default == default and c.has_default


def test_null_and_missing_defaults() -> None:
    assert (col("c int").default, col("c int").has_default, col("c int").nullable) == (None, True, True)
    c = col("c int NOT NULL")
    assert (c.default, c.has_default, c.nullable) == (None, False, False)
    c = col("c int DEFAULT NULL")
    assert (c.default, c.has_default) == (None, True)
    c = col("c int AS (1) VIRTUAL")
    assert c.generated and not c.has_default
    c = col("c int AUTO_INCREMENT, KEY (c)")
    assert c.auto_increment and not c.nullable and not c.has_default
    # timestamps follow explicit_defaults_for_timestamp=ON (MariaDB 10.10+): nothing implicit
    c = col("c timestamp")
    assert c.nullable and c.default is None


def test_generated_comment_and_serial() -> None:
    assert col("c int GENERATED ALWAYS AS (d + 1) STORED, d int").generated
    assert col("c int AS (d) PERSISTENT, d int").generated
    assert col("c int COMMENT 'hi ''there'''").comment == "hi 'there'"
    t = parse_create_table("CREATE TABLE t (c SERIAL)", "db")
    c = t.column("c")
    assert (c.type, c.unsigned, c.nullable, c.auto_increment) == ("bigint", True, False, True)
    assert t.indexes == (IndexInfo("c", ("c",), unique=True),)


def test_indexes_inline_named_ordered_like_mariadb() -> None:
    t = parse_create_table(
        "CREATE TABLE t (a int, b int KEY, c int UNIQUE, d varchar(10), e text, "
        "UNIQUE (c), KEY (d(3)), INDEX `x y``z` (a, b), UNIQUE KEY uq (d(2)), UNIQUE (a), FULLTEXT (e), KEY (a))",
        "db",
    )
    assert t.indexes == (
        IndexInfo("PRIMARY", ("b",), unique=True, primary=True),
        IndexInfo("c", ("c",), unique=True),
        IndexInfo("c_2", ("c",), unique=True),
        IndexInfo("a", ("a",), unique=True),
        IndexInfo("uq", ("d",), unique=True),
        IndexInfo("d", ("d",)),
        IndexInfo("x y`z", ("a", "b")),
        IndexInfo("a_2", ("a",)),
        IndexInfo("e", ("e",)),
    )
    assert t.primary_key == ("b",) and not t.column("b").nullable


def test_not_null_unique_keys_sort_first_and_long_unique_keys_last() -> None:
    t = parse_create_table(
        "CREATE TABLE t (a int, b int NOT NULL, h text, UNIQUE (h), UNIQUE (a), UNIQUE (b))", "db"
    )
    assert [i.name for i in t.indexes] == ["b", "a", "h"]
    assert t.handle_key == ("b",)


def test_primary_key_columns_become_not_null() -> None:
    t = parse_create_table("CREATE TABLE t (a int NULL, b int DEFAULT NULL, PRIMARY KEY (a, b))", "db")
    assert [(c.nullable, c.has_default) for c in t.columns] == [(False, False), (False, False)]


def test_foreign_key_indexes() -> None:
    t = parse_create_table(
        "CREATE TABLE t (a int, b int, c int, PRIMARY KEY (a, b), "
        "CONSTRAINT fk1 FOREIGN KEY (c) REFERENCES p (id), FOREIGN KEY (b) REFERENCES p (id), "
        "FOREIGN KEY (a) REFERENCES p (id) ON DELETE SET NULL ON UPDATE NO ACTION)",
        "db",
    )
    assert [i.name for i in t.indexes] == ["PRIMARY", "fk1", "b"]  # (a) is covered by the primary key


def test_partitioned_comments_and_executable_comments() -> None:
    t = parse_create_table(
        "/* lead */ CREATE TABLE `d`.`t` (a int -- one\n, b int # two\n) /*!40101 DEFAULT CHARSET=latin1 */"
        " /*!50100 PARTITION BY HASH (a) PARTITIONS 2 */",
        "other",
    )
    assert (t.schema, t.table, t.charset, t.partitioned, t.column_names) == (
        "d",
        "t",
        "latin1",
        True,
        ("a", "b"),
    )


def test_show_create_table_output_parses() -> None:
    shown = """CREATE TABLE `t1` (
  `id` bigint(20) unsigned NOT NULL AUTO_INCREMENT,
  `v` varchar(10) CHARACTER SET latin1 COLLATE latin1_bin DEFAULT 'it''s',
  `ts` timestamp NULL DEFAULT current_timestamp() ON UPDATE current_timestamp(),
  `j` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL CHECK (json_valid(`j`)),
  `g` int(11) GENERATED ALWAYS AS (`id` + 1) VIRTUAL,
  `i` int(11) INVISIBLE DEFAULT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `h` (`v`) USING HASH,
  KEY `x` (`v`(3))
) ENGINE=InnoDB AUTO_INCREMENT=5 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci COMMENT='x'
 PARTITION BY HASH (`id`)
PARTITIONS 2"""
    t = parse_create_table(shown, "db", 9)
    assert t.version == 9 and t.partitioned and t.charset == "utf8mb4"
    assert t.column("v").default == "it's" and t.column("v").collation == "latin1_bin"
    assert t.column("ts").default == "CURRENT_TIMESTAMP"
    assert t.column("j").type == "json"
    assert [i.name for i in t.indexes] == ["PRIMARY", "h", "x"]


def test_case_of_names_is_kept() -> None:
    t = parse_create_table("CREATE TABLE `MyT` (`Col` int, KEY `IdX` (col))", "DB")
    assert (t.schema, t.table, t.columns[0].name) == ("DB", "MyT", "Col")
    assert t.indexes == (IndexInfo("IdX", ("Col",)),)
    assert t.has_column("COL")


@pytest.mark.parametrize(
    ("sql", "fragment"),
    [
        ("CREATE TABLE t (a int) SELECT 1", "CREATE TABLE ... SELECT"),
        ("CREATE TABLE t AS SELECT 1 AS a", "CREATE TABLE ... SELECT"),
        ("CREATE TABLE t (a vector(3))", "VECTOR"),
        ("CREATE TABLE t (a varchar)", "VARCHAR needs a length"),
        ("CREATE TABLE t (a int", "expected"),
        ("CREATE TABLE t (a int, a int)", "duplicate column"),
        ("CREATE TABLE t (a int, KEY (b))", "'b' does not exist"),
        ("CREATE TABLE t (a int) WITH SYSTEM VERSIONING", "system-versioned"),
        ("SELECT 1", "not a CREATE TABLE"),
        ("CREATE TABLE t (a notatype)", "unknown type"),
    ],
)
def test_errors_name_the_statement(sql: str, fragment: str) -> None:
    with pytest.raises(SchemaError) as ei:
        parse_create_table(sql, "db")
    assert fragment in str(ei.value)


def test_unqualified_name_without_default_database_fails() -> None:
    with pytest.raises(SchemaError, match="no default database"):
        parse_create_table("CREATE TABLE t (a int)", "")


def test_tokenizer_strings_identifiers_and_comments() -> None:
    toks = tokenize(
        "SELECT 'a''b\\n', \"q\", `x``y`, 1.5e3, 0x1F, b'101', x'41' /* c */ -- d\n #e\n/*!40101 Z */"
    )
    assert [(t.kind, t.value) for t in toks] == [
        ("id", "SELECT"),
        ("str", "a'b\n"),
        ("op", ","),
        ("str", "q"),
        ("op", ","),
        ("qid", "x`y"),
        ("op", ","),
        ("num", "1.5e3"),
        ("op", ","),
        ("hex", "1F"),
        ("op", ","),
        ("bin", "101"),
        ("op", ","),
        ("hex", "41"),
        ("id", "Z"),
    ]


def test_first_word_skips_comments() -> None:
    assert first_word("  /* x */ -- y\n alter table t") == "ALTER"
    assert first_word("/*!40101 SET NAMES utf8 */") == "SET"
    assert first_word("# c\nBEGIN") == "BEGIN"
    assert first_word("") == ""


@pytest.mark.parametrize(
    "sql",
    [
        "BEGIN",
        "COMMIT",
        "XA START 'x'",
        "SAVEPOINT s1",
        "INSERT INTO t VALUES ('unterminated \\' string')",
        "UPDATE t SET a = 1",
        "FLUSH TABLES",
        "GRANT SELECT ON *.* TO 'u'@'%'",
        "SET @x = 1",
        "/*!40101 SET character_set_client = utf8 */",
        "CREATE TEMPORARY TABLE tmp (a int)",
        "DROP TEMPORARY TABLE IF EXISTS tmp",
        "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1",
        "CREATE DEFINER=`root`@`localhost` PROCEDURE p() BEGIN END",
        "DROP PROCEDURE p",
        "CREATE USER u",
        "RENAME USER a TO b",
    ],
)
def test_statements_that_change_no_table_are_ignored(sql: str) -> None:
    assert isinstance(parse_statement(sql), Ignored)


def test_drop_table_as_the_binlog_writes_it() -> None:
    st = parse_statement("DROP TABLE IF EXISTS `a`,`db`.`b` /* generated by server */")
    assert isinstance(st, DropTable) and st.if_exists
    assert [(n.schema, n.name) for n in st.names] == [(None, "a"), ("db", "b")]


def test_alter_table_specs() -> None:
    st = parse_statement(
        "ALTER TABLE t ADD COLUMN a int FIRST, ADD b int AFTER a, DROP COLUMN IF EXISTS c, MODIFY d int, "
        "CHANGE e f int, RENAME COLUMN g TO h, ALTER i SET DEFAULT 1, ALTER COLUMN j DROP DEFAULT, "
        "ADD PRIMARY KEY (a), ADD UNIQUE KEY u (b), DROP INDEX k, DROP PRIMARY KEY, RENAME INDEX l TO m, "
        "RENAME TO n, CONVERT TO CHARACTER SET latin1, DEFAULT CHARSET utf8mb4, ENGINE=InnoDB, ALGORITHM=INPLACE"
    )
    assert isinstance(st, AlterTable)
    assert [s.action for s in st.specs] == [
        "add_column",
        "add_column",
        "drop_column",
        "modify_column",
        "change_column",
        "rename_column",
        "set_default",
        "drop_default",
        "add_index",
        "add_index",
        "drop_index",
        "drop_primary",
        "rename_index",
        "rename_table",
        "convert",
        "options",
        "options",
        "algorithm",
    ]
    assert st.specs[0].position == ("first", None) and st.specs[1].position == ("after", "a")


def test_create_table_like() -> None:
    st = parse_statement("CREATE TABLE IF NOT EXISTS a LIKE db.b")
    assert isinstance(st, CreateTable) and st.like is not None and st.if_not_exists
    assert (st.like.schema, st.like.name) == ("db", "b")


@pytest.mark.parametrize(
    ("x", "type_", "text"),
    [
        (0.0, "double", "0"),
        (1e15, "double", "1e15"),
        (123456789.125, "double", "123456789.125"),
        (1.5e17, "double", "1.5e17"),
        (0.000123456789, "double", "0.000123456789"),
        (1e-15, "double", "0.000000000000001"),
        (1.234e-5, "float", "0.00001234"),
        (123456789.0, "float", "123457000"),
        (3.4e38, "float", "3.4e38"),
        (-2.5, "double", "-2.5"),
    ],
)
def test_format_real_matches_my_gcvt(x: float, type_: str, text: str) -> None:
    assert format_real(x, type_, None) == text


def test_column_references_with_and_without_a_constraint_name() -> None:
    # main/foreign_key.test: MariaDB parses and ignores a column's REFERENCES, named or not
    t = parse_create_table(
        "create table t1 (a int not null references t2, "
        "b int not null constraint t2_c references t2 (c) on delete cascade, "
        "c int constraint positive check (c > 0), "
        "primary key (a,b), foreign key (a) references t3 match full, "
        "foreign key (a,b) references t3 (c,d) on delete no action on update no action)",
        "db",
    )
    assert list(t.column_names) == ["a", "b", "c"]
    assert (t.indexes[0].name, tuple(t.indexes[0].columns)) == ("PRIMARY", ("a", "b"))
