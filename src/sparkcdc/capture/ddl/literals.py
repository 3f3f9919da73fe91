"""A DDL's string literals made independent of the session that sent it.

A string literal is converted into the session's ``collation_connection`` charset before it
reaches a column, so in a binary column (``BINARY``/``VARBINARY``, an ENUM or SET of ``CHARACTER
SET binary``) its bytes are that charset's: under ``SET collation_connection=utf32_bin``,
``ENUM('a') CHARACTER SET binary`` has the element ``0x00000061``. (A ``BLOB``'s DEFAULT is an
expression MariaDB keeps as UTF-8 text: its bytes are the text's UTF-8 bytes in any session.) The
binlog's QUERY event records that charset, and MariaDB's replica runs the statement under it; the
statement text alone does not say it. A downstream that runs the text (the MySQL sink, a consumer
of canal-json's DDL, anyone's) connects in UTF-8 and would create ``'a'`` instead.

``pin_connection_literals`` rewrites those literals as hex literals of the bytes the upstream
stored. The batch planner calls it for each DDL statement, with the catalog as it stands before the
statement, before the statement reaches the catalog, the schema history and every sink: they all
see one statement that means the same in any session. The catalog says the charset of a column
that names none (the table's default, or the database's for a new table: an ``ALTER TABLE ADD
COLUMN e ENUM('é')`` in a table whose default charset is binary is a binary ENUM). Only literals
whose bytes differ from their UTF-8 bytes are rewritten: under a UTF-8 connection, or for ASCII
text under an ASCII-compatible one, the text is left as it is.
"""

from __future__ import annotations

from collections.abc import Callable

from sparkcdc.capture.charsets import charset_codec
from sparkcdc.capture.ddl.charsets import SERVER_CHARSET, SERVER_COLLATION, resolve_charset
from sparkcdc.capture.ddl.columns import build_column
from sparkcdc.capture.ddl.parser import first_word, parse_statement
from sparkcdc.capture.ddl.statements import AlterTable, ColumnDef, CreateTable
from sparkcdc.errors import DecodeError, SchemaError

_AS_WRITTEN = frozenset({"utf8", "utf8mb3", "utf8mb4", "binary"})
"""Connection charsets under which a literal's bytes are its UTF-8 bytes: the text of a QUERY event
sent in a binary client charset is read as UTF-8."""
_EXPRESSION_DEFAULT = frozenset({"tinyblob", "blob", "mediumblob", "longblob"})
"""Binary types whose DEFAULT is an expression MariaDB keeps as UTF-8 text and evaluates again:
its bytes are the text's UTF-8 bytes whatever the connection charset."""


ColumnCharset = Callable[[CreateTable | AlterTable], tuple[str, str] | None]
"""The (charset, collation) a column of the statement gets when it names none, None when unknown
(``SchemaCatalog.column_charset``)."""


def pin_connection_literals(
    sql: str, connection_charset: str | None, column_charset: ColumnCharset | None = None
) -> str:
    """``sql`` with the string literals of its binary columns written as hex literals of the bytes
    ``connection_charset`` gives them (``sql`` itself when none differs from its UTF-8 bytes).

    ``connection_charset``: the charset of the session's ``collation_connection`` (None: unknown,
    read as UTF-8; under a binary one, literals keep the client charset's bytes: pass that).
    ``column_charset``: what a column that names no charset gets; without it, or when it does not
    know, a ``CREATE TABLE``'s own table options or the server's default decide, and such a column of
    an ``ALTER TABLE`` counts as text. A statement the DDL parser cannot read is returned
    unchanged: applying it raises the parser's error with its position.
    """
    if connection_charset is None or connection_charset.lower() in _AS_WRITTEN:
        return sql
    if first_word(sql) not in ("CREATE", "ALTER"):
        return sql
    try:
        st = parse_statement(sql)
    except SchemaError:
        return sql
    table = (
        column_charset(st)
        if column_charset is not None and isinstance(st, (CreateTable, AlterTable))
        else None
    )
    if isinstance(st, CreateTable):
        table = table or resolve_charset(st.options.charset, st.options.collation, None)
        columns = st.columns
    elif isinstance(st, AlterTable):
        columns = [c for spec in st.specs for c in ([spec.column] if spec.column else []) + spec.columns]
    else:
        return sql
    edits: list[tuple[int, int, str]] = []
    for cdef in columns:
        if cdef.string_literals and _is_binary(cdef, table):
            codec = charset_codec(connection_charset, "the session's collation_connection")
            for start, end, text in cdef.string_literals:
                edits.extend(_hex_edit(sql[start:end], start, end, text, codec))
    for start, end, text in sorted(edits, reverse=True):
        sql = sql[:start] + text + sql[end:]
    return sql


def _is_binary(cdef: ColumnDef, table: tuple[str, str] | None) -> bool:
    """Whether the column stores bytes; a column whose charset comes from an unknown table default
    counts as text."""
    try:
        col = build_column(cdef, table or (SERVER_CHARSET, SERVER_COLLATION))
    except (SchemaError, DecodeError):
        return False
    return col.holds_bytes and col.type not in _EXPRESSION_DEFAULT


def _hex_edit(written: str, start: int, end: int, text: str, codec: str) -> list[tuple[int, int, str]]:
    """The edit writing the literal (or run of adjacent literals) ``written`` at ``start:end``, whose
    value is ``text``, as hex, if its bytes under ``codec`` differ from its UTF-8 bytes."""
    try:
        stored = text.encode(codec, "surrogateescape")
    except UnicodeEncodeError as exc:
        raise DecodeError(
            f"the string literal {written!r} of a binary column holds bytes its client charset "
            f"does not read, so sparkcdc cannot tell what the session's connection charset ({codec}) "
            "made of them; write the literal as a hex literal (X'...') upstream"
        ) from exc
    if stored == text.encode("utf-8", "surrogateescape"):
        return []
    return [(start, end, f"X'{stored.hex().upper()}'")]
