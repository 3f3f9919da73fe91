"""String literals of binary columns under a connection charset other than UTF-8.

MariaDB converts a literal into ``collation_connection``'s charset before it reaches a column, so
a binary column's ENUM elements and DEFAULT hold that charset's bytes. Capture rewrites them as hex
literals (``ddl.literals``) and the catalog keeps a binary element or default as bytes, one code
point per byte, as the table map's metadata gives them. The oracle form ``connection_literals``
checks the same statements against MariaDB's native replica on the three paths.
"""

from __future__ import annotations

import pytest

from sparkcdc.capture.catalog import SchemaCatalog, parse_create_table
from sparkcdc.capture.ddl import build_column
from sparkcdc.capture.ddl.literals import pin_connection_literals
from sparkcdc.capture.ddl.parser import parse_statement
from sparkcdc.capture.ddl.statements import CreateTable
from sparkcdc.errors import DecodeError
from sparkcdc.model.schema import ColumnInfo
from sparkcdc.sink.mysql.statements import _param_fn

CREATE = (
    "CREATE TABLE t (id INT PRIMARY KEY, "
    "c1 ENUM('a','b','ac') CHARACTER SET binary DEFAULT 'b', "
    "s1 SET('x', 'y') CHARSET binary, "
    "c2 ENUM('a','b') CHARACTER SET utf32 DEFAULT 'a', "
    "v VARCHAR(10) CHARACTER SET binary DEFAULT 'q', "
    "w VARBINARY(8) DEFAULT 'r' 's', "
    "bl BLOB DEFAULT 'z', "
    "i ENUM(_latin1'a', 'b') CHARACTER SET binary)"
)


def test_binary_columns_literals_become_the_bytes_the_connection_gave_them() -> None:
    got = pin_connection_literals(CREATE, "utf32")
    assert got == (
        "CREATE TABLE t (id INT PRIMARY KEY, "
        "c1 ENUM(X'00000061',X'00000062',X'0000006100000063') CHARACTER SET binary DEFAULT X'00000062', "
        "s1 SET(X'00000078', X'00000079') CHARSET binary, "
        # a utf32 column holds the characters, whatever the connection
        "c2 ENUM('a','b') CHARACTER SET utf32 DEFAULT 'a', "
        "v VARCHAR(10) CHARACTER SET binary DEFAULT X'00000071', "
        # adjacent strings are one literal
        "w VARBINARY(8) DEFAULT X'0000007200000073', "
        # a BLOB's DEFAULT is an expression MariaDB keeps as UTF-8 text
        "bl BLOB DEFAULT 'z', "
        # a literal with an introducer has its own charset
        "i ENUM(_latin1'a', X'00000062') CHARACTER SET binary)"
    )
    # the rewritten statement parses, and its binary elements are the bytes
    info = parse_create_table(got, "db")
    cols = {c.name: c for c in info.columns}
    assert cols["c1"].elements == ("\0\0\0a", "\0\0\0b", "\0\0\0a\0\0\0c")
    assert cols["c1"].default == "\0\0\0b"
    assert cols["s1"].elements == ("\0\0\0x", "\0\0\0y")
    assert cols["c2"].elements == ("a", "b")
    assert cols["v"].type == "varbinary" and cols["v"].default == "\0\0\0q"


@pytest.mark.parametrize("connection", [None, "utf8mb4", "utf8mb3", "utf8", "binary"])
def test_a_utf8_or_unknown_connection_leaves_the_text(connection: str | None) -> None:
    assert pin_connection_literals(CREATE, connection) == CREATE


def test_ascii_under_latin1_is_left_and_other_text_is_rewritten() -> None:
    sql = "ALTER TABLE t ADD COLUMN e ENUM('x', 'é') CHARACTER SET binary DEFAULT 'x', MODIFY b BINARY(2) DEFAULT 'ü'"
    assert pin_connection_literals(sql, "latin1") == (
        "ALTER TABLE t ADD COLUMN e ENUM('x', X'E9') CHARACTER SET binary DEFAULT 'x', MODIFY b BINARY(2) DEFAULT X'FC'"
    )


def test_the_tables_binary_default_charset_counts() -> None:
    create = "CREATE TABLE t (e ENUM('é', 'x') DEFAULT 'é') CHARACTER SET binary"
    assert pin_connection_literals(create, "latin1") == (
        "CREATE TABLE t (e ENUM(X'E9', 'x') DEFAULT X'E9') CHARACTER SET binary"
    )
    # an ALTER does not say the table's charset: the catalog does
    cat = SchemaCatalog()
    cat.add_database("db", "utf8mb4")
    for ddl in (create, "CREATE TABLE x (id INT)"):
        cat.apply_ddl(ddl, "db", 1)
    alter = "ALTER TABLE t ADD COLUMN f ENUM('é'), ADD g VARCHAR(2) CHARACTER SET utf8mb4 DEFAULT 'ü'"
    assert pin_connection_literals(alter, "latin1", lambda st: cat.column_charset(st, "db")) == (
        "ALTER TABLE t ADD COLUMN f ENUM(X'E9'), ADD g VARCHAR(2) CHARACTER SET utf8mb4 DEFAULT 'ü'"
    )
    # without the catalog, or for a text table, such a column is text
    assert pin_connection_literals(alter, "latin1") == alter
    text = alter.replace("TABLE t", "TABLE x")
    assert pin_connection_literals(text, "latin1", lambda st: cat.column_charset(st, "db")) == text
    # the statement's own table options hold for the columns it adds, wherever they are written
    converted = "ALTER TABLE x ADD COLUMN f ENUM('é'), DEFAULT CHARSET binary"
    assert pin_connection_literals(converted, "latin1", lambda st: cat.column_charset(st, "db")) == (
        "ALTER TABLE x ADD COLUMN f ENUM(X'E9'), DEFAULT CHARSET binary"
    )


def test_a_new_table_without_charset_takes_its_databases() -> None:
    cat = SchemaCatalog()
    cat.add_database("b", "binary")
    cat.add_database("u", "utf8mb4")
    create = "CREATE TABLE t (e ENUM('é') DEFAULT 'é')"
    assert pin_connection_literals(create, "latin1", lambda st: cat.column_charset(st, "b")) == (
        "CREATE TABLE t (e ENUM(X'E9') DEFAULT X'E9')"
    )
    assert pin_connection_literals(create, "latin1", lambda st: cat.column_charset(st, "u")) == create
    # unknown database: the server's default (text)
    assert pin_connection_literals(create, "latin1", lambda st: cat.column_charset(st, "nodb")) == create


def test_statements_without_binary_literals_or_unreadable_are_left() -> None:
    for sql in (
        "DROP TABLE t",
        "CREATE TABLE t (a INT)",
        "CREATE TABLE t (a VARCHAR(3) DEFAULT 'é')",
        "INSERT INTO t VALUES ('é')",
        "CREATE TABLE t (a ENUM('é') CHARACTER SET binary",  # unterminated: applying it names the error
    ):
        assert pin_connection_literals(sql, "utf32") == sql


def _column(sql: str) -> ColumnInfo:
    st = parse_statement(sql)
    assert isinstance(st, CreateTable)
    return build_column(st.columns[0], ("utf8mb4", "utf8mb4_general_ci"))


def test_a_binary_element_is_bytes_a_text_element_is_characters() -> None:
    # a string in a binary ENUM is its UTF-8 bytes (the statement reached capture as UTF-8 or hex)
    assert _column("CREATE TABLE t (e ENUM('é', 0xE9, 'a') CHARACTER SET binary)").elements == (
        "\xc3\xa9",
        "\xe9",
        "a",
    )
    # a hex element in a text column is that charset's bytes; a string beside it stays as written
    assert _column("CREATE TABLE t (e ENUM(0x00E9, 'ü') CHARACTER SET utf16)").elements == ("é", "ü")
    # the table's charset decides when the column names none
    st = parse_statement("CREATE TABLE t (e ENUM('é'))")
    assert isinstance(st, CreateTable)
    assert build_column(st.columns[0], ("binary", "binary")).elements == ("\xc3\xa9",)


def test_a_binary_default_is_bytes() -> None:
    assert _column("CREATE TABLE t (b VARBINARY(4) DEFAULT 'é')").default == "\xc3\xa9"
    assert _column("CREATE TABLE t (b VARBINARY(4) DEFAULT 0xE9)").default == "\xe9"
    assert _column("CREATE TABLE t (b BLOB DEFAULT 'é')").default == "\xc3\xa9"
    assert _column("CREATE TABLE t (b VARCHAR(4) DEFAULT 'é')").default == "é"


def test_the_mysql_sink_sends_a_binary_element_as_its_bytes() -> None:
    col = _column("CREATE TABLE t (e ENUM('é', 'a') CHARACTER SET binary)")
    fn = _param_fn(col)
    assert fn is not None
    assert fn("\xc3\xa9") == b"\xc3\xa9"
    assert fn("a") == "a"


def test_the_storage_schema_file_prints_a_binary_default_as_tidb_does() -> None:
    from sparkcdc.sink.storage.schema_file import TableCol

    assert TableCol.from_column(_column("CREATE TABLE t (b VARBINARY(4) DEFAULT 'é')"), False).default == "é"
    # bytes that are no UTF-8 print as Go prints them, U+FFFD
    assert (
        TableCol.from_column(_column("CREATE TABLE t (b VARBINARY(4) DEFAULT 0xE9)"), False).default
        == "\ufffd"
    )


def test_a_literal_its_connection_charset_cannot_hold_is_refused_by_name() -> None:
    # bytes the client charset did not read (kept as escapes) have no UTF-32 form to compute
    sql = "CREATE TABLE t (b VARBINARY(4) DEFAULT 'a\udcff')"
    with pytest.raises(DecodeError, match="binary column"):
        pin_connection_literals(sql, "utf32")
