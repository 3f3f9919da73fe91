"""A MySQL/MariaDB DDL parser for the schema tracker.

It reads the statements a binlog QUERY event carries and the text ``SHOW CREATE
TABLE`` prints, and turns them into small statement objects (``CreateTable``,
``AlterTable`` ...). Column definitions become ``ColumnInfo`` with every type fact
normalised the way MariaDB 10.11 stores it (default display widths, charset
inheritance, binary charsets, ``DEFAULT`` values as the server prints them), so a
tracked table equals the table the server reports.

The project has its own parser rather than a general SQL parser (sqlglot keeps
display widths, ``BINARY`` attributes, the JSON check and charset introducers
too) because its output is checked against the binlog: it must produce exactly
the normalised column types the table map of every ROWS event is compared with,
and it must fail loudly on anything it does not understand that changes a table,
never guess. So this is a small hand-written tokenizer and recursive-descent
parser for exactly the DDL subset a schema tracker needs.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, InvalidOperation, localcontext
from typing import Literal

from sparkcdc.errors import SchemaError
from sparkcdc.model.schema import INT_TYPES, ColumnInfo

# --------------------------------------------------------------------------------------------
# Character sets (MariaDB 10.11: default collation and bytes per character)
# --------------------------------------------------------------------------------------------

CHARSETS: dict[str, tuple[str, int]] = {
    "armscii8": ("armscii8_general_ci", 1),
    "ascii": ("ascii_general_ci", 1),
    "big5": ("big5_chinese_ci", 2),
    "binary": ("binary", 1),
    "cp1250": ("cp1250_general_ci", 1),
    "cp1251": ("cp1251_general_ci", 1),
    "cp1256": ("cp1256_general_ci", 1),
    "cp1257": ("cp1257_general_ci", 1),
    "cp850": ("cp850_general_ci", 1),
    "cp852": ("cp852_general_ci", 1),
    "cp866": ("cp866_general_ci", 1),
    "cp932": ("cp932_japanese_ci", 2),
    "dec8": ("dec8_swedish_ci", 1),
    "eucjpms": ("eucjpms_japanese_ci", 3),
    "euckr": ("euckr_korean_ci", 2),
    "gb2312": ("gb2312_chinese_ci", 2),
    "gbk": ("gbk_chinese_ci", 2),
    "geostd8": ("geostd8_general_ci", 1),
    "greek": ("greek_general_ci", 1),
    "hebrew": ("hebrew_general_ci", 1),
    "hp8": ("hp8_english_ci", 1),
    "keybcs2": ("keybcs2_general_ci", 1),
    "koi8r": ("koi8r_general_ci", 1),
    "koi8u": ("koi8u_general_ci", 1),
    "latin1": ("latin1_swedish_ci", 1),
    "latin2": ("latin2_general_ci", 1),
    "latin5": ("latin5_turkish_ci", 1),
    "latin7": ("latin7_general_ci", 1),
    "macce": ("macce_general_ci", 1),
    "macroman": ("macroman_general_ci", 1),
    "sjis": ("sjis_japanese_ci", 2),
    "swe7": ("swe7_swedish_ci", 1),
    "tis620": ("tis620_thai_ci", 1),
    "ucs2": ("ucs2_general_ci", 2),
    "ujis": ("ujis_japanese_ci", 3),
    "utf16": ("utf16_general_ci", 4),
    "utf16le": ("utf16le_general_ci", 4),
    "utf32": ("utf32_general_ci", 4),
    "utf8mb3": ("utf8mb3_general_ci", 3),
    "utf8mb4": ("utf8mb4_general_ci", 4),
}

SERVER_CHARSET = "utf8mb4"
SERVER_COLLATION = "utf8mb4_general_ci"


def normalize_charset(name: str) -> str:
    """The canonical charset name (``utf8`` is ``utf8mb3`` in MariaDB 10.6+)."""
    n = name.lower()
    if n == "utf8":
        return "utf8mb3"
    return n


def normalize_collation(name: str) -> str:
    """The canonical collation name (``utf8_bin`` is ``utf8mb3_bin``)."""
    n = name.lower()
    if n.startswith("utf8_"):
        return "utf8mb3_" + n[5:]
    return n


def charset_of_collation(collation: str) -> str:
    """The charset a collation belongs to."""
    c = normalize_collation(collation)
    if c == "binary":
        return "binary"
    for cs in sorted(CHARSETS, key=len, reverse=True):
        if c.startswith(cs + "_"):
            return cs
    return c.split("_", 1)[0]


def default_collation(charset: str) -> str:
    """The default collation of a charset in MariaDB 10.11."""
    cs = normalize_charset(charset)
    if cs in CHARSETS:
        return CHARSETS[cs][0]
    return cs + "_general_ci"


def mbmaxlen(charset: str | None) -> int:
    """Bytes per character of a charset (1 for binary/unknown)."""
    if not charset:
        return 1
    return CHARSETS.get(normalize_charset(charset), ("", 4))[1]


def resolve_charset(
    charset: str | None, collation: str | None, fallback: tuple[str, str] | None = None
) -> tuple[str, str] | None:
    """Complete a (charset, collation) pair the way the server does; None when neither is known."""
    cs = normalize_charset(charset) if charset else None
    co = normalize_collation(collation) if collation else None
    if cs is None and co is None:
        return fallback
    if cs is None:
        assert co is not None
        cs = charset_of_collation(co)
    if co is None:
        co = default_collation(cs)
    return cs, co


# --------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------

TokKind = Literal["id", "qid", "str", "num", "hex", "bin", "op"]


@dataclass(frozen=True, slots=True)
class Token:
    """One lexical token; ``value`` is the unescaped text (strings, quoted names)."""

    kind: TokKind
    value: str
    pos: int

    @property
    def upper(self) -> str:
        """The keyword spelling of an unquoted identifier ("" for anything else)."""
        return self.value.upper() if self.kind == "id" else ""


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "b": "\b", "Z": "\x1a"}
_OPS3 = ("<=>", "->>")
_OPS2 = ("<=", ">=", "<>", "!=", "||", "&&", ":=", "->", "<<", ">>")


def _is_ident_char(c: str) -> bool:
    return c.isalnum() or c in "_$" or ord(c) >= 0x80


def tokenize(sql: str) -> list[Token]:
    """Split SQL into tokens: comments dropped, MariaDB executable comments ``/*!...*/`` kept."""
    toks: list[Token] = []
    i, n = 0, len(sql)
    exec_depth = 0
    while i < n:
        c = sql[i]
        if c.isspace():
            i += 1
            continue
        if c == "#" or (sql.startswith("--", i) and (i + 2 >= n or sql[i + 2] in " \t\r\n")):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if sql.startswith("/*", i):
            if sql.startswith("/*!", i) or sql.startswith("/*M!", i):
                j = i + (3 if sql[i + 2] == "!" else 4)
                while j < n and sql[j].isdigit():
                    j += 1
                exec_depth += 1
                i = j
                continue
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if exec_depth and sql.startswith("*/", i):
            exec_depth -= 1
            i += 2
            continue
        if c in "'\"":
            val, i2 = _read_string(sql, i)
            toks.append(Token("str", val, i))
            i = i2
            continue
        if c == "`":
            j = i + 1
            buf: list[str] = []
            while True:
                if j >= n:
                    raise SchemaError(f"unterminated quoted identifier at offset {i} in {_clip(sql)!r}")
                if sql[j] == "`":
                    if j + 1 < n and sql[j + 1] == "`":
                        buf.append("`")
                        j += 2
                        continue
                    break
                buf.append(sql[j])
                j += 1
            toks.append(Token("qid", "".join(buf), i))
            i = j + 1
            continue
        if c in "xXbB" and i + 1 < n and sql[i + 1] == "'":
            j = sql.find("'", i + 2)
            if j < 0:
                raise SchemaError(f"unterminated literal at offset {i} in {_clip(sql)!r}")
            toks.append(Token("hex" if c in "xX" else "bin", sql[i + 2 : j], i))
            i = j + 1
            continue
        if c in "nN" and i + 1 < n and sql[i + 1] == "'":
            val, i2 = _read_string(sql, i + 1)
            toks.append(Token("str", val, i))
            i = i2
            continue
        if c == "0" and i + 2 < n and sql[i + 1] in "xb" and sql[i + 2] in "0123456789abcdefABCDEF":
            j = i + 2
            while j < n and _is_ident_char(sql[j]):
                j += 1
            body = sql[i + 2 : j]
            ok = (
                all(ch in "0123456789abcdefABCDEF" for ch in body)
                if sql[i + 1] == "x"
                else set(body) <= {"0", "1"}
            )
            if ok:
                toks.append(Token("hex" if sql[i + 1] == "x" else "bin", body, i))
                i = j
                continue
        prev_is_name = bool(toks) and (toks[-1].kind in ("id", "qid") or toks[-1].value == ")")
        if c.isdigit() or (c == "." and i + 1 < n and sql[i + 1].isdigit() and not prev_is_name):
            m = re.compile(r"\d*\.?\d*(?:[eE][+-]?\d+)?").match(sql, i)
            assert m is not None
            j = m.end()
            if j < n and _is_ident_char(sql[j]) and "." not in m.group(0):
                # MySQL allows names that start with digits (``1a``)
                while j < n and _is_ident_char(sql[j]):
                    j += 1
                toks.append(Token("id", sql[i:j], i))
            else:
                toks.append(Token("num", m.group(0), i))
            i = j
            continue
        if _is_ident_char(c):
            j = i
            while j < n and _is_ident_char(sql[j]):
                j += 1
            toks.append(Token("id", sql[i:j], i))
            i = j
            continue
        for op in _OPS3 + _OPS2:
            if sql.startswith(op, i):
                toks.append(Token("op", op, i))
                i += len(op)
                break
        else:
            toks.append(Token("op", c, i))
            i += 1
    return toks


def _read_string(sql: str, i: int) -> tuple[str, int]:
    q = sql[i]
    j = i + 1
    n = len(sql)
    buf: list[str] = []
    while True:
        if j >= n:
            raise SchemaError(f"unterminated string at offset {i} in {_clip(sql)!r}")
        ch = sql[j]
        if ch == "\\" and j + 1 < n:
            e = sql[j + 1]
            buf.append(_ESCAPES.get(e, "\\" + e if e in "%_" else e))
            j += 2
            continue
        if ch == q:
            if j + 1 < n and sql[j + 1] == q:
                buf.append(q)
                j += 2
                continue
            return "".join(buf), j + 1
        buf.append(ch)
        j += 1


def _clip(sql: str, n: int = 300) -> str:
    s = " ".join(sql.split())
    return s if len(s) <= n else s[: n - 3] + "..."


def quote_ident(name: str) -> str:
    """A backquoted identifier."""
    return "`" + name.replace("`", "``") + "`"


# --------------------------------------------------------------------------------------------
# Statement objects
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TableName:
    """A possibly qualified table name."""

    schema: str | None
    name: str

    def resolve(self, default_schema: str | None, query: str) -> tuple[str, str]:
        """(schema, table) with the default database filled in."""
        schema = self.schema if self.schema is not None else default_schema
        if not schema:
            raise SchemaError(
                f"table {quote_ident(self.name)} is not qualified and the statement has no default "
                f"database: {_clip(query)!r}; qualify the name (db.table)"
            )
        return schema, self.name


@dataclass(slots=True)
class DefaultValue:
    """A column DEFAULT: ``kind`` null, literal (``text`` + ``lit`` kind) or expr (canonical text)."""

    kind: Literal["null", "literal", "expr"]
    text: str = ""
    lit: Literal["str", "num", "hex", "bin", "bool", ""] = ""


@dataclass(slots=True)
class ColumnDef:
    """A column definition as written."""

    name: str
    type_name: str
    args: list[str] = field(default_factory=list)
    unsigned: bool = False
    zerofill: bool = False
    binary_collation: bool = False
    charset: str | None = None
    collation: str | None = None
    not_null: bool | None = None
    default: DefaultValue | None = None
    auto_increment: bool = False
    generated: bool = False
    comment: str = ""
    inline_primary: bool = False
    inline_unique: bool = False
    json_check: bool = False
    national: bool = False
    references: bool = False
    serial_default_value: bool = False


@dataclass(slots=True)
class IndexDef:
    """An index definition: kind primary/unique/key/fulltext/spatial/foreign."""

    kind: Literal["primary", "unique", "key", "fulltext", "spatial", "foreign"]
    name: str | None
    parts: list[tuple[str, int | None]]
    using_hash: bool = False
    if_not_exists: bool = False


@dataclass(slots=True)
class TableOptions:
    """The table options the tracker cares about."""

    charset: str | None = None
    collation: str | None = None
    partitioned: bool | None = None
    """True for PARTITION BY, False for REMOVE PARTITIONING, None when untouched."""
    as_select: bool = False


@dataclass(slots=True)
class CreateTable:
    """CREATE [OR REPLACE] TABLE."""

    name: TableName
    columns: list[ColumnDef]
    items: list[ColumnDef | IndexDef]
    """Columns and index definitions in statement order (for index naming)."""
    options: TableOptions
    if_not_exists: bool = False
    or_replace: bool = False
    like: TableName | None = None


@dataclass(slots=True)
class CreateDatabase:
    """CREATE DATABASE|SCHEMA."""

    name: str
    if_not_exists: bool
    or_replace: bool
    charset: str | None
    collation: str | None


@dataclass(slots=True)
class AlterDatabase:
    """ALTER DATABASE|SCHEMA."""

    name: str | None
    charset: str | None
    collation: str | None


@dataclass(slots=True)
class DropDatabase:
    """DROP DATABASE|SCHEMA."""

    name: str
    if_exists: bool


@dataclass(slots=True)
class DropTable:
    """DROP TABLE a, b."""

    names: list[TableName]
    if_exists: bool


@dataclass(slots=True)
class TruncateTable:
    """TRUNCATE [TABLE] t."""

    name: TableName


@dataclass(slots=True)
class RenameTable:
    """RENAME TABLE a TO b, c TO d."""

    pairs: list[tuple[TableName, TableName]]
    if_exists: bool = False


@dataclass(slots=True)
class AlterSpec:
    """One comma-separated ALTER TABLE specification."""

    action: str
    """add_column, drop_column, modify_column, change_column, rename_column, set_default,
    drop_default, add_index, drop_index, drop_primary, rename_index, rename_table, convert,
    options, partition, drop_foreign_key, drop_constraint, noop."""
    column: ColumnDef | None = None
    columns: list[ColumnDef] = field(default_factory=list)
    index: IndexDef | None = None
    indexes: list[IndexDef] = field(default_factory=list)
    name: str | None = None
    new_name: str | None = None
    position: tuple[str, str | None] | None = None
    """("first", None) or ("after", column) for ADD/MODIFY/CHANGE."""
    if_exists: bool = False
    default: DefaultValue | None = None
    table: TableName | None = None
    options: TableOptions | None = None


@dataclass(slots=True)
class AlterTable:
    """ALTER TABLE t spec, spec, ..."""

    name: TableName
    specs: list[AlterSpec]
    if_exists: bool = False


@dataclass(slots=True)
class CreateIndex:
    """CREATE [UNIQUE|FULLTEXT|SPATIAL] INDEX name ON t (...)."""

    table: TableName
    index: IndexDef


@dataclass(slots=True)
class DropIndex:
    """DROP INDEX name ON t."""

    table: TableName
    name: str
    if_exists: bool


@dataclass(slots=True)
class ViewStmt:
    """CREATE/ALTER/DROP VIEW (no table shape)."""

    action: Literal["create", "alter", "drop"]
    names: list[TableName]


@dataclass(slots=True)
class Ignored:
    """A statement that does not change any table shape (DML, transaction control, grants ...)."""

    reason: str


Statement = (
    CreateTable
    | CreateDatabase
    | AlterDatabase
    | DropDatabase
    | DropTable
    | TruncateTable
    | RenameTable
    | AlterTable
    | CreateIndex
    | DropIndex
    | ViewStmt
    | Ignored
)


# --------------------------------------------------------------------------------------------
# Parser
# --------------------------------------------------------------------------------------------

_TYPE_ALIASES = {
    "BOOL": "tinyint",
    "BOOLEAN": "tinyint",
    "INTEGER": "int",
    "INT1": "tinyint",
    "INT2": "smallint",
    "INT3": "mediumint",
    "INT4": "int",
    "INT8": "bigint",
    "MIDDLEINT": "mediumint",
    "DEC": "decimal",
    "NUMERIC": "decimal",
    "FIXED": "decimal",
    "NUMBER": "decimal",
    "REAL": "double",
    "FLOAT4": "float",
    "FLOAT8": "double",
    "CHARACTER": "char",
    "NCHAR": "char",
    "NVARCHAR": "varchar",
}
_GEOMETRY = {
    "GEOMETRY",
    "POINT",
    "LINESTRING",
    "POLYGON",
    "MULTIPOINT",
    "MULTILINESTRING",
    "MULTIPOLYGON",
    "GEOMETRYCOLLECTION",
}
_PLAIN_TYPES = {
    "TINYINT",
    "SMALLINT",
    "MEDIUMINT",
    "INT",
    "BIGINT",
    "DECIMAL",
    "FLOAT",
    "DOUBLE",
    "DATE",
    "DATETIME",
    "TIMESTAMP",
    "TIME",
    "YEAR",
    "CHAR",
    "VARCHAR",
    "BINARY",
    "VARBINARY",
    "TINYTEXT",
    "TEXT",
    "MEDIUMTEXT",
    "LONGTEXT",
    "TINYBLOB",
    "BLOB",
    "MEDIUMBLOB",
    "LONGBLOB",
    "ENUM",
    "SET",
    "BIT",
    "JSON",
}
_UNSUPPORTED_TYPES = {"UUID", "INET4", "INET6", "VECTOR", "ROW", "XMLTYPE"}

# Leading words of ALTER TABLE specifications that only touch table options or storage.
_ALTER_NOOP_WORDS = {
    "FORCE",
    "ENABLE",
    "DISABLE",
    "DISCARD",
    "IMPORT",
    "ORDER",
    "WITH",
    "WITHOUT",
    "VALIDATION",
}
_PARTITION_OP_WORDS = {
    "COALESCE",
    "REORGANIZE",
    "EXCHANGE",
    "ANALYZE",
    "CHECK",
    "OPTIMIZE",
    "REBUILD",
    "REPAIR",
    "TRUNCATE",
}


class _Parser:
    def __init__(self, sql: str) -> None:
        self.sql = sql
        self.toks = tokenize(sql)
        # a trailing ';' is common in captured statements
        while self.toks and self.toks[-1].kind == "op" and self.toks[-1].value == ";":
            self.toks.pop()
        self.i = 0

    # -- primitives --------------------------------------------------------------------------
    def error(self, what: str) -> SchemaError:
        t = self.peek()
        near = "end of statement" if t is None else repr(self.sql[t.pos : t.pos + 40])
        return SchemaError(f"cannot parse DDL ({what}) near {near}: {_clip(self.sql)!r}")

    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def at_end(self) -> bool:
        return self.i >= len(self.toks)

    def next(self) -> Token:
        t = self.peek()
        if t is None:
            raise self.error("unexpected end")
        self.i += 1
        return t

    def is_kw(self, *words: str, k: int = 0) -> bool:
        for off, w in enumerate(words):
            t = self.peek(k + off)
            if t is None or t.upper != w:
                return False
        return True

    def accept_kw(self, *words: str) -> bool:
        if self.is_kw(*words):
            self.i += len(words)
            return True
        return False

    def expect_kw(self, *words: str) -> None:
        if not self.accept_kw(*words):
            raise self.error(f"expected {' '.join(words)}")

    def is_op(self, op: str, k: int = 0) -> bool:
        t = self.peek(k)
        return t is not None and t.kind == "op" and t.value == op

    def accept_op(self, op: str) -> bool:
        if self.is_op(op):
            self.i += 1
            return True
        return False

    def expect_op(self, op: str) -> None:
        if not self.accept_op(op):
            raise self.error(f"expected {op!r}")

    def ident(self, what: str = "a name") -> str:
        t = self.peek()
        if t is None or t.kind not in ("id", "qid", "str"):
            raise self.error(f"expected {what}")
        self.i += 1
        return t.value

    def table_name(self) -> TableName:
        first = self.ident("a table name")
        if self.is_op(".") and self.peek(1) is not None and self.peek(1).kind in ("id", "qid"):  # type: ignore[union-attr]
            self.i += 1
            return TableName(first, self.ident("a table name"))
        return TableName(None, first)

    def skip_parens(self) -> list[Token]:
        """Consume a balanced ``( ... )`` and return the tokens inside."""
        self.expect_op("(")
        depth = 1
        start = self.i
        while True:
            t = self.next()
            if t.kind == "op" and t.value == "(":
                depth += 1
            elif t.kind == "op" and t.value == ")":
                depth -= 1
                if depth == 0:
                    return self.toks[start : self.i - 1]

    def value_word(self) -> str:
        """An option value: a name, string or number."""
        self.accept_op("=")
        t = self.next()
        return t.value

    def accept_if_exists(self) -> bool:
        return self.accept_kw("IF", "EXISTS")

    def accept_if_not_exists(self) -> bool:
        return self.accept_kw("IF", "NOT", "EXISTS")

    # -- statements --------------------------------------------------------------------------
    def statement(self) -> Statement:
        if self.at_end():
            return Ignored("empty statement")
        t = self.peek()
        assert t is not None
        w = t.upper
        if w == "CREATE":
            self.i += 1
            return self.create()
        if w == "ALTER":
            self.i += 1
            return self.alter()
        if w == "DROP":
            self.i += 1
            return self.drop()
        if w == "RENAME":
            self.i += 1
            return self.rename()
        if w == "TRUNCATE":
            self.i += 1
            self.accept_kw("TABLE")
            name = self.table_name()
            return TruncateTable(name)
        return Ignored(f"{w or t.value} statement")

    def create(self) -> Statement:
        or_replace = self.accept_kw("OR", "REPLACE")
        temporary = False
        unique_kind: str | None = None
        while True:
            if self.accept_kw("TEMPORARY"):
                temporary = True
            elif self.is_kw("ALGORITHM") or self.is_kw("SQL", "SECURITY"):
                self.accept_kw("SQL")
                self.next()
                self.value_word()
            elif self.accept_kw("DEFINER"):
                self.accept_op("=")
                self.next()
                if self.accept_op("@"):
                    self.next()
                elif self.accept_op("("):
                    self.expect_op(")")
            elif self.is_kw("UNIQUE") or self.is_kw("FULLTEXT") or self.is_kw("SPATIAL"):
                unique_kind = self.next().upper
            elif self.accept_kw("ONLINE") or self.accept_kw("OFFLINE") or self.accept_kw("AGGREGATE"):
                pass
            else:
                break
        t = self.peek()
        w = t.upper if t is not None else ""
        if w == "TABLE":
            self.i += 1
            if temporary:
                return Ignored("temporary table")
            return self.create_table(or_replace)
        if w in ("DATABASE", "SCHEMA"):
            self.i += 1
            ine = self.accept_if_not_exists()
            name = self.ident("a database name")
            cs, co = self.charset_options()
            return CreateDatabase(name, ine, or_replace, cs, co)
        if w == "INDEX":
            self.i += 1
            ine = self.accept_if_not_exists()
            name = self.ident("an index name")
            self.skip_index_type()
            self.expect_kw("ON")
            table = self.table_name()
            parts, using_hash = self.index_parts()
            kind: Literal["unique", "key", "fulltext", "spatial"] = {
                "UNIQUE": "unique",
                "FULLTEXT": "fulltext",
                "SPATIAL": "spatial",
                None: "key",
            }[unique_kind]  # type: ignore[assignment]
            using_hash = self.index_tail() or using_hash
            return CreateIndex(table, IndexDef(kind, name, parts, using_hash, ine))
        if w == "VIEW":
            self.i += 1
            self.accept_if_not_exists()
            return ViewStmt("create", [self.table_name()])
        return Ignored(f"CREATE {w}")

    def charset_options(self) -> tuple[str | None, str | None]:
        cs: str | None = None
        co: str | None = None
        while not self.at_end():
            self.accept_kw("DEFAULT")
            if self.accept_kw("CHARACTER", "SET") or self.accept_kw("CHARSET"):
                cs = self.value_word()
            elif self.accept_kw("COLLATE"):
                co = self.value_word()
            else:
                self.next()
                if self.is_op("="):
                    self.value_word()
        if cs is not None and cs.upper() == "DEFAULT":
            cs = None
        if co is not None and co.upper() == "DEFAULT":
            co = None
        return cs, co

    def create_table(self, or_replace: bool) -> Statement:
        ine = self.accept_if_not_exists()
        name = self.table_name()
        if self.accept_kw("LIKE"):
            return CreateTable(name, [], [], TableOptions(), ine, or_replace, like=self.table_name())
        if self.is_op("(") and self.is_kw("LIKE", k=1):
            self.i += 2
            like = self.table_name()
            self.expect_op(")")
            return CreateTable(name, [], [], TableOptions(), ine, or_replace, like=like)
        columns: list[ColumnDef] = []
        items: list[ColumnDef | IndexDef] = []
        if self.is_op("(") and not (self.is_kw("SELECT", k=1) or self.is_op("(", k=1)):
            self.i += 1
            while True:
                item = self.create_item()
                if item is not None:
                    items.append(item)
                    if isinstance(item, ColumnDef):
                        columns.append(item)
                if self.accept_op(","):
                    continue
                self.expect_op(")")
                break
        options = self.table_options(stop_words=())
        if not columns and not options.as_select:
            raise self.error("a table needs at least one column")
        return CreateTable(name, columns, items, options, ine, or_replace)

    def table_options(self, stop_words: tuple[str, ...], allow_select: bool = True) -> TableOptions:
        """Scan table options to the end (or a stop word), keeping charset/collation/partitioning."""
        opts = TableOptions()
        while not self.at_end():
            t = self.peek()
            assert t is not None
            if t.upper in stop_words:
                break
            if t.kind == "op" and t.value == ",":
                if "," in stop_words:
                    break
                self.i += 1
                continue
            if self.accept_kw("DEFAULT"):
                continue
            if self.accept_kw("CHARACTER", "SET") or self.accept_kw("CHARSET"):
                v = self.value_word()
                opts.charset = None if v.upper() == "DEFAULT" else v
                continue
            if self.accept_kw("COLLATE"):
                v = self.value_word()
                opts.collation = None if v.upper() == "DEFAULT" else v
                continue
            if self.is_kw("PARTITION", "BY"):
                opts.partitioned = True
                self.skip_rest_of_spec()
                break
            if self.accept_kw("REMOVE", "PARTITIONING"):
                opts.partitioned = False
                continue
            if self.is_kw("WITH", "SYSTEM", "VERSIONING"):
                raise self.error("system-versioned tables are not supported")
            if allow_select and (
                t.upper in ("SELECT", "AS", "IGNORE", "REPLACE", "WITH")
                or (t.kind == "op" and t.value == "(" and self.is_kw("SELECT", k=1))
            ):
                opts.as_select = True
                self.i = len(self.toks)
                break
            if t.kind == "op" and t.value == "(":
                self.skip_parens()
                continue
            self.i += 1
        return opts

    def skip_rest_of_spec(self) -> None:
        depth = 0
        while not self.at_end():
            t = self.peek()
            assert t is not None
            if t.kind == "op" and t.value == "(":
                depth += 1
            elif t.kind == "op" and t.value == ")":
                if depth == 0:
                    return  # the end of the enclosing list
                depth -= 1
            elif t.kind == "op" and t.value == "," and depth == 0:
                return
            self.i += 1

    def create_item(self) -> ColumnDef | IndexDef | None:
        idx = self.index_def()
        if idx is not None:
            return idx
        if self.is_kw("CONSTRAINT") or self.is_kw("CHECK") or self.is_kw("PERIOD", "FOR"):
            # a table CHECK constraint or a system-versioning period: no shape change
            self.skip_rest_of_spec()
            return None
        name = self.ident("a column name")
        return self.column_def(name)

    def index_def(self) -> IndexDef | None:
        """An index definition if one starts here, else None (position unchanged)."""
        save = self.i
        constraint: str | None = None
        if self.accept_kw("CONSTRAINT"):
            t = self.peek()
            if t is not None and (
                t.kind == "qid"
                or (t.kind == "id" and t.upper not in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"))
            ):
                constraint = self.next().value
        w = self.peek().upper if self.peek() is not None else ""  # type: ignore[union-attr]
        kind: Literal["primary", "unique", "key", "fulltext", "spatial", "foreign"]
        if w == "PRIMARY":
            self.i += 1
            self.expect_kw("KEY")
            kind = "primary"
        elif w == "UNIQUE":
            self.i += 1
            if not (self.accept_kw("INDEX") or self.accept_kw("KEY")):
                pass
            kind = "unique"
        elif w in ("INDEX", "KEY") and constraint is None:
            self.i += 1
            kind = "key"
        elif w in ("FULLTEXT", "SPATIAL") and constraint is None:
            self.i += 1
            if not (self.accept_kw("INDEX") or self.accept_kw("KEY")):
                pass
            kind = "fulltext" if w == "FULLTEXT" else "spatial"
        elif w == "FOREIGN":
            self.i += 1
            self.expect_kw("KEY")
            kind = "foreign"
        else:
            self.i = save
            return None
        ine = self.accept_if_not_exists()
        name: str | None = None
        if kind != "primary" and not self.is_op("(") and not self.is_kw("USING"):
            name = self.ident("an index name")
        using_hash = self.skip_index_type()
        parts, uh = self.index_parts()
        using_hash = using_hash or uh
        if kind == "foreign":
            self.skip_references()
            return IndexDef(kind, name or constraint, parts, False, ine)
        using_hash = self.index_tail() or using_hash
        if kind == "primary":
            name = "PRIMARY"
        elif name is None:
            name = constraint
        return IndexDef(kind, name, parts, using_hash, ine)

    def skip_index_type(self) -> bool:
        using_hash = False
        while self.is_kw("USING") or self.is_kw("TYPE"):
            self.i += 1
            using_hash = self.next().upper == "HASH" or using_hash
        return using_hash

    def index_parts(self) -> tuple[list[tuple[str, int | None]], bool]:
        self.expect_op("(")
        parts: list[tuple[str, int | None]] = []
        while True:
            if self.is_op("("):
                raise self.error("functional index parts are not supported")
            col = self.ident("an index column")
            length: int | None = None
            if self.accept_op("("):
                length = int(self.next().value)
                self.expect_op(")")
            self.accept_kw("ASC") or self.accept_kw("DESC")
            parts.append((col, length))
            if self.accept_op(","):
                continue
            self.expect_op(")")
            break
        return parts, False

    def index_tail(self) -> bool:
        """Index options after the column list; True when USING HASH is among them."""
        using_hash = False
        while not self.at_end():
            if self.is_kw("USING") or self.is_kw("TYPE"):
                using_hash = self.skip_index_type() or using_hash
            elif self.accept_kw("KEY_BLOCK_SIZE") or self.accept_kw("COMMENT"):
                self.value_word()
            elif self.accept_kw("WITH", "PARSER"):
                self.next()
            elif self.accept_kw("CLUSTERING"):
                self.value_word()
            elif (
                self.accept_kw("NOT", "IGNORED")
                or self.accept_kw("IGNORED")
                or self.accept_kw("VISIBLE")
                or self.accept_kw("INVISIBLE")
            ):
                pass
            else:
                break
        return using_hash

    def skip_references(self) -> None:
        self.expect_kw("REFERENCES")
        self.table_name()
        if self.is_op("("):
            self.skip_parens()
        while True:
            if self.accept_kw("MATCH"):
                self.next()
            elif self.is_kw("ON", "DELETE") or self.is_kw("ON", "UPDATE"):
                self.i += 2
                if self.accept_kw("SET"):
                    self.next()
                elif self.accept_kw("NO"):
                    self.expect_kw("ACTION")
                else:
                    self.next()
            else:
                return

    def column_type(self, col: ColumnDef) -> None:
        t = self.next()
        w = t.upper
        if not w:
            raise self.error(f"expected a type for column {col.name!r}")
        if w == "DOUBLE":
            self.accept_kw("PRECISION")
            base = "double"
        elif w in ("CHARACTER", "CHAR") and self.accept_kw("VARYING"):
            base = "varchar"
        elif w == "NATIONAL":
            col.national = True
            if self.accept_kw("VARCHAR"):
                base = "varchar"
            elif self.accept_kw("CHAR") or self.accept_kw("CHARACTER"):
                base = "varchar" if self.accept_kw("VARYING") else "char"
            else:
                raise self.error("expected CHAR or VARCHAR after NATIONAL")
        elif w in ("NCHAR", "NVARCHAR"):
            col.national = True
            base = (
                "varchar"
                if (w == "NVARCHAR" or self.accept_kw("VARCHAR") or self.accept_kw("VARYING"))
                else "char"
            )
        elif w == "LONG":
            if self.accept_kw("VARBINARY"):
                base = "mediumblob"
            else:
                self.accept_kw("VARCHAR") or self.accept_kw("CHAR", "VARYING")
                base = "mediumtext"
        elif w == "SERIAL":
            base = "bigint"
            col.unsigned = True
            col.not_null = True
            col.auto_increment = True
            col.inline_unique = True
        elif w in _GEOMETRY:
            base = "geometry"
        elif w in _TYPE_ALIASES:
            base = _TYPE_ALIASES[w]
            if w in ("BOOL", "BOOLEAN"):
                col.args = ["1"]
            if w == "NCHAR":
                col.national = True
        elif w in _PLAIN_TYPES:
            base = w.lower()
        elif w in _UNSUPPORTED_TYPES:
            raise SchemaError(
                f"column {col.name!r} has type {w}, which sparkcdc does not support: "
                f"{_clip(self.sql)!r}; use a standard MySQL type"
            )
        else:
            raise self.error(f"unknown type {t.value!r} for column {col.name!r}")
        col.type_name = base
        if self.is_op("("):
            inner = self.skip_parens()
            if base in ("enum", "set"):
                col.args = [x.value for x in inner if x.kind == "str"]
            else:
                col.args = [x.value for x in inner if x.kind == "num"]

    def column_def(self, name: str) -> ColumnDef:
        col = ColumnDef(name=name, type_name="")
        self.column_type(col)
        while not self.at_end():
            t = self.peek()
            assert t is not None
            if t.kind == "op":
                break
            w = t.upper
            if w == "UNSIGNED":
                self.i += 1
                col.unsigned = True
            elif w == "SIGNED":
                self.i += 1
            elif w == "ZEROFILL":
                self.i += 1
                col.zerofill = True
                col.unsigned = True
            elif w == "BINARY":
                self.i += 1
                col.binary_collation = True
            elif w == "ASCII":
                self.i += 1
                col.charset = "latin1"
            elif w == "UNICODE":
                self.i += 1
                col.charset = "ucs2"
            elif w == "BYTE":
                self.i += 1
                col.charset = "binary"
            elif self.accept_kw("CHARACTER", "SET") or self.accept_kw("CHARSET"):
                col.charset = self.ident("a charset")
            elif w == "COLLATE":
                self.i += 1
                col.collation = self.ident("a collation")
            elif self.accept_kw("NOT", "NULL"):
                col.not_null = True
            elif w == "NULL":
                self.i += 1
                col.not_null = False
            elif w == "DEFAULT":
                self.i += 1
                col.default = self.default_value()
            elif self.accept_kw("ON", "UPDATE"):
                self.default_value()
            elif w == "AUTO_INCREMENT":
                self.i += 1
                col.auto_increment = True
            elif self.accept_kw("SERIAL", "DEFAULT", "VALUE"):
                col.not_null = True
                col.auto_increment = True
                col.inline_unique = True
            elif self.accept_kw("UNIQUE"):
                self.accept_kw("KEY")
                col.inline_unique = True
            elif self.accept_kw("PRIMARY"):
                self.accept_kw("KEY")
                col.inline_primary = True
            elif w == "KEY":
                self.i += 1
                col.inline_primary = True
            elif w == "COMMENT":
                self.i += 1
                col.comment = self.next().value
            elif w in ("INVISIBLE", "VISIBLE"):
                self.i += 1
            elif self.accept_kw("WITH", "SYSTEM", "VERSIONING") or self.accept_kw(
                "WITHOUT", "SYSTEM", "VERSIONING"
            ):
                pass
            elif w in ("COLUMN_FORMAT", "STORAGE", "REF_SYSTEM_ID"):
                self.i += 1
                self.value_word()
            elif w == "COMPRESSED":
                self.i += 1
                if self.is_op("="):
                    self.value_word()
            elif w in ("GENERATED", "AS"):
                if self.accept_kw("GENERATED"):
                    self.expect_kw("ALWAYS")
                self.expect_kw("AS")
                if self.accept_kw("ROW"):
                    self.next()
                else:
                    self.skip_parens()
                if self.is_kw("VIRTUAL") or self.is_kw("PERSISTENT") or self.is_kw("STORED"):
                    self.i += 1
                col.generated = True
            elif w in ("CHECK", "CONSTRAINT"):
                if self.accept_kw("CONSTRAINT") and not self.is_kw("CHECK"):
                    self.next()
                self.expect_kw("CHECK")
                inner = self.skip_parens()
                if _is_json_valid_of(inner, col.name):
                    col.json_check = True
            elif w == "REFERENCES":
                self.skip_references()
                col.references = True
            else:
                break
        return col

    def default_value(self) -> DefaultValue:
        t = self.peek()
        if t is None:
            raise self.error("expected a DEFAULT value")
        if t.kind == "op" and t.value == "(":
            inner = self.skip_parens()
            return _expr_default(inner)
        if t.kind == "op" and t.value in ("-", "+"):
            self.i += 1
            n = self.next()
            if n.kind != "num":
                raise self.error("expected a number after a sign in DEFAULT")
            return DefaultValue("literal", ("-" if t.value == "-" else "") + n.value, "num")
        if t.kind == "str":
            self.i += 1
            s = t.value
            while self.peek() is not None and self.peek().kind == "str":  # type: ignore[union-attr]
                s += self.next().value
            return DefaultValue("literal", s, "str")
        if t.kind in ("num", "hex", "bin"):
            self.i += 1
            return DefaultValue("literal", t.value, t.kind)  # type: ignore[arg-type]
        if t.kind == "id":
            w = t.upper
            nxt = self.peek(1)
            if w.startswith("_") and nxt is not None and nxt.kind in ("str", "hex", "bin"):
                self.i += 2
                return DefaultValue("literal", nxt.value, nxt.kind)  # type: ignore[arg-type]
            if w == "NULL":
                self.i += 1
                return DefaultValue("null")
            if w in ("TRUE", "FALSE"):
                self.i += 1
                return DefaultValue("literal", "1" if w == "TRUE" else "0", "bool")
            if w in ("DATE", "TIME", "TIMESTAMP") and nxt is not None and nxt.kind == "str":
                self.i += 2
                return DefaultValue("literal", nxt.value, "str")
            start = self.i
            self.i += 1
            if self.is_op("("):
                self.skip_parens()
            return _expr_default(self.toks[start : self.i])
        raise self.error("unsupported DEFAULT value")

    def alter(self) -> Statement:
        self.accept_kw("ONLINE") or self.accept_kw("OFFLINE")
        self.accept_kw("IGNORE")
        if self.accept_kw("TABLE"):
            return self.alter_table()
        if self.accept_kw("DATABASE") or self.accept_kw("SCHEMA"):
            name: str | None = None
            t = self.peek()
            if t is not None and (
                t.kind == "qid"
                or (
                    t.kind == "id"
                    and t.upper
                    not in ("DEFAULT", "CHARACTER", "CHARSET", "COLLATE", "COMMENT", "UPGRADE", "READ")
                )
            ):
                name = self.next().value
            cs, co = self.charset_options()
            return AlterDatabase(name, cs, co)
        # ALTER [ALGORITHM=..] [DEFINER=..] [SQL SECURITY ..] VIEW
        while self.is_kw("ALGORITHM") or self.is_kw("DEFINER") or self.is_kw("SQL", "SECURITY"):
            if self.accept_kw("SQL"):
                self.next()
                self.next()
                continue
            self.next()
            self.accept_op("=")
            self.next()
            if self.accept_op("@"):
                self.next()
            elif self.accept_op("("):
                self.expect_op(")")
        if self.accept_kw("VIEW"):
            return ViewStmt("alter", [self.table_name()])
        t = self.peek()
        return Ignored(f"ALTER {t.upper if t is not None else ''}")

    def alter_table(self) -> Statement:
        if_exists = self.accept_if_exists()
        name = self.table_name()
        if self.accept_kw("WAIT"):
            self.next()
        self.accept_kw("NOWAIT")
        specs: list[AlterSpec] = []
        while not self.at_end():
            if self.accept_op(","):
                continue
            specs.append(self.alter_spec())
        return AlterTable(name, specs, if_exists)

    def position(self) -> tuple[str, str | None] | None:
        if self.accept_kw("FIRST"):
            return ("first", None)
        if self.accept_kw("AFTER"):
            return ("after", self.ident("a column name"))
        return None

    def alter_spec(self) -> AlterSpec:
        t = self.peek()
        assert t is not None
        w = t.upper
        if w == "ADD":
            self.i += 1
            if self.is_kw("PARTITION"):
                self.skip_rest_of_spec()
                return AlterSpec("partition")
            if self.is_kw("PERIOD") or self.is_kw("SYSTEM", "VERSIONING"):
                raise self.error("system versioning is not supported")
            if self.is_kw("CHECK") or (self.is_kw("CONSTRAINT") and not self._constraint_is_index()):
                self.skip_rest_of_spec()
                return AlterSpec("noop")
            idx = self.index_def()
            if idx is not None:
                return AlterSpec("add_index", index=idx, if_exists=idx.if_not_exists)
            self.accept_kw("COLUMN")
            ine = self.accept_if_not_exists()
            if self.accept_op("("):
                cols: list[ColumnDef] = []
                idxs: list[IndexDef] = []
                while True:
                    ix = self.index_def()
                    if ix is not None:
                        idxs.append(ix)
                    else:
                        cols.append(self.column_def(self.ident("a column name")))
                    if self.accept_op(","):
                        continue
                    self.expect_op(")")
                    break
                return AlterSpec("add_column", columns=cols, indexes=idxs, if_exists=ine)
            col = self.column_def(self.ident("a column name"))
            return AlterSpec("add_column", columns=[col], position=self.position(), if_exists=ine)
        if w == "DROP":
            self.i += 1
            if self.accept_kw("PRIMARY", "KEY"):
                return AlterSpec("drop_primary")
            if self.accept_kw("INDEX") or self.accept_kw("KEY"):
                ie = self.accept_if_exists()
                return AlterSpec("drop_index", name=self.ident("an index name"), if_exists=ie)
            if self.accept_kw("FOREIGN", "KEY"):
                ie = self.accept_if_exists()
                return AlterSpec("drop_foreign_key", name=self.ident(), if_exists=ie)
            if self.accept_kw("CONSTRAINT"):
                ie = self.accept_if_exists()
                return AlterSpec("drop_constraint", name=self.ident(), if_exists=ie)
            if self.accept_kw("CHECK"):
                self.skip_rest_of_spec()
                return AlterSpec("noop")
            if self.is_kw("PARTITION"):
                self.skip_rest_of_spec()
                return AlterSpec("partition")
            if self.is_kw("PERIOD") or self.is_kw("SYSTEM", "VERSIONING"):
                raise self.error("system versioning is not supported")
            self.accept_kw("COLUMN")
            ie = self.accept_if_exists()
            name = self.ident("a column name")
            self.accept_kw("RESTRICT") or self.accept_kw("CASCADE")
            return AlterSpec("drop_column", name=name, if_exists=ie)
        if w == "MODIFY":
            self.i += 1
            self.accept_kw("COLUMN")
            ie = self.accept_if_exists()
            col = self.column_def(self.ident("a column name"))
            return AlterSpec(
                "modify_column", column=col, name=col.name, position=self.position(), if_exists=ie
            )
        if w == "CHANGE":
            self.i += 1
            self.accept_kw("COLUMN")
            ie = self.accept_if_exists()
            old = self.ident("a column name")
            col = self.column_def(self.ident("a column name"))
            return AlterSpec("change_column", column=col, name=old, position=self.position(), if_exists=ie)
        if w == "ALTER":
            self.i += 1
            if self.accept_kw("INDEX") or self.accept_kw("KEY"):
                self.skip_rest_of_spec()
                return AlterSpec("noop")
            if self.accept_kw("CHECK") or self.accept_kw("CONSTRAINT"):
                self.skip_rest_of_spec()
                return AlterSpec("noop")
            self.accept_kw("COLUMN")
            ie = self.accept_if_exists()
            name = self.ident("a column name")
            if self.accept_kw("SET", "DEFAULT"):
                return AlterSpec("set_default", name=name, default=self.default_value(), if_exists=ie)
            if self.accept_kw("DROP", "DEFAULT"):
                return AlterSpec("drop_default", name=name, if_exists=ie)
            if self.accept_kw("SET", "VISIBLE") or self.accept_kw("SET", "INVISIBLE"):
                return AlterSpec("noop")
            raise self.error("expected SET DEFAULT or DROP DEFAULT")
        if w == "RENAME":
            self.i += 1
            if self.accept_kw("COLUMN"):
                ie = self.accept_if_exists()
                old = self.ident("a column name")
                self.expect_kw("TO")
                return AlterSpec(
                    "rename_column", name=old, new_name=self.ident("a column name"), if_exists=ie
                )
            if self.accept_kw("INDEX") or self.accept_kw("KEY"):
                ie = self.accept_if_exists()
                old = self.ident("an index name")
                self.expect_kw("TO")
                return AlterSpec("rename_index", name=old, new_name=self.ident("an index name"), if_exists=ie)
            self.accept_kw("TO") or self.accept_kw("AS")
            return AlterSpec("rename_table", table=self.table_name())
        if w == "CONVERT":
            self.i += 1
            if self.is_kw("PARTITION") or self.is_kw("TABLE"):
                raise self.error("CONVERT PARTITION/TABLE is not supported")
            self.expect_kw("TO")
            if not (self.accept_kw("CHARACTER", "SET") or self.accept_kw("CHARSET")):
                raise self.error("expected CHARACTER SET")
            cs = self.value_word()
            co: str | None = None
            if self.accept_kw("COLLATE"):
                co = self.value_word()
            return AlterSpec("convert", options=TableOptions(charset=cs, collation=co))
        if w == "PARTITION" and not self.is_kw("PARTITION", "BY"):
            self.skip_rest_of_spec()
            return AlterSpec("partition")
        if w in _PARTITION_OP_WORDS and self.is_kw("PARTITION", k=1):
            self.skip_rest_of_spec()
            return AlterSpec("partition")
        if w in ("ALGORITHM", "LOCK"):
            self.skip_rest_of_spec()
            return AlterSpec("algorithm")
        if w in _ALTER_NOOP_WORDS:
            self.skip_rest_of_spec()
            return AlterSpec("noop")
        if t.kind != "id":
            raise self.error("unexpected token in ALTER TABLE")
        opts = self.table_options(stop_words=(",",), allow_select=False)
        return AlterSpec("options", options=opts)

    def _constraint_is_index(self) -> bool:
        j = 1
        t = self.peek(j)
        if t is not None and t.upper not in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
            j += 1
        t = self.peek(j)
        return t is not None and t.upper in ("PRIMARY", "UNIQUE", "FOREIGN")

    def drop(self) -> Statement:
        temporary = self.accept_kw("TEMPORARY")
        if self.accept_kw("TABLE") or self.accept_kw("TABLES"):
            if temporary:
                return Ignored("temporary table")
            ie = self.accept_if_exists()
            names = [self.table_name()]
            while self.accept_op(","):
                names.append(self.table_name())
            return DropTable(names, ie)
        if self.accept_kw("DATABASE") or self.accept_kw("SCHEMA"):
            ie = self.accept_if_exists()
            return DropDatabase(self.ident("a database name"), ie)
        if self.accept_kw("INDEX"):
            self.accept_kw("ONLINE") or self.accept_kw("OFFLINE")
            ie = self.accept_if_exists()
            name = self.ident("an index name")
            self.expect_kw("ON")
            return DropIndex(self.table_name(), name, ie)
        if self.accept_kw("VIEW"):
            self.accept_if_exists()
            names = [self.table_name()]
            while self.accept_op(","):
                names.append(self.table_name())
            return ViewStmt("drop", names)
        t = self.peek()
        return Ignored(f"DROP {t.upper if t is not None else ''}")

    def rename(self) -> Statement:
        if not (self.accept_kw("TABLE") or self.accept_kw("TABLES")):
            t = self.peek()
            return Ignored(f"RENAME {t.upper if t is not None else ''}")
        ie = self.accept_if_exists()
        pairs: list[tuple[TableName, TableName]] = []
        while True:
            a = self.table_name()
            if self.accept_kw("WAIT"):
                self.next()
            self.accept_kw("NOWAIT")
            self.expect_kw("TO")
            b = self.table_name()
            pairs.append((a, b))
            if not self.accept_op(","):
                break
        return RenameTable(pairs, ie)


def _is_json_valid_of(inner: list[Token], column: str) -> bool:
    """Whether a CHECK body is exactly ``json_valid(<column>)``."""
    return (
        len(inner) == 4
        and inner[0].upper == "JSON_VALID"
        and inner[1].value == "("
        and inner[2].kind in ("id", "qid")
        and inner[2].value.lower() == column.lower()
        and inner[3].value == ")"
    )


_CURRENT_TS = {"CURRENT_TIMESTAMP", "NOW", "LOCALTIME", "LOCALTIMESTAMP"}


def _expr_default(toks: list[Token]) -> DefaultValue:
    """A DEFAULT expression, canonicalised so user text and SHOW CREATE text agree."""
    while len(toks) >= 2 and toks[0].value == "(" and toks[-1].value == ")" and _wraps(toks):
        toks = toks[1:-1]
    if not toks:
        return DefaultValue("expr", "")
    if len(toks) == 1 and toks[0].kind in ("num", "str", "hex", "bin"):
        return DefaultValue("literal", toks[0].value, toks[0].kind)  # type: ignore[arg-type]
    if len(toks) == 1 and toks[0].upper == "NULL":
        return DefaultValue("null")
    if len(toks) == 2 and toks[0].value in ("-", "+") and toks[1].kind == "num":
        return DefaultValue("literal", ("-" if toks[0].value == "-" else "") + toks[1].value, "num")
    if toks[0].upper in _CURRENT_TS:
        fsp = ""
        if len(toks) == 4 and toks[1].value == "(" and toks[2].kind == "num" and toks[3].value == ")":
            fsp = toks[2].value if toks[2].value != "0" else ""
        if len(toks) in (1, 3, 4):
            return DefaultValue("expr", f"CURRENT_TIMESTAMP({fsp})" if fsp else "CURRENT_TIMESTAMP")
    out: list[str] = []
    prev_word = False
    for t in toks:
        if t.kind == "str":
            s = "'" + t.value.replace("\\", "\\\\").replace("'", "''") + "'"
            word = False
        elif t.kind == "qid":
            s = quote_ident(t.value.lower())
            word = False
        elif t.kind == "id":
            s = t.value.lower()
            word = True
        elif t.kind == "num":
            s = t.value
            word = True
        elif t.kind == "hex":
            s = f"X'{t.value}'"
            word = False
        elif t.kind == "bin":
            s = f"b'{t.value}'"
            word = False
        else:
            s = t.value
            word = False
        if prev_word and word:
            out.append(" ")
        out.append(s)
        prev_word = word
    return DefaultValue("expr", "".join(out))


def _wraps(toks: list[Token]) -> bool:
    """Whether the first '(' closes at the last token."""
    depth = 0
    for k, t in enumerate(toks):
        if t.kind == "op" and t.value == "(":
            depth += 1
        elif t.kind == "op" and t.value == ")":
            depth -= 1
            if depth == 0 and k != len(toks) - 1:
                return False
    return True


_DDL_WORDS = {"CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE"}
_LEAD_RE = re.compile(
    r"(?:\s+|#[^\n]*(?:\n|$)|--(?:[ \t\r][^\n]*)?(?:\n|$)|/\*(?![!M])(?:.|\n)*?\*/|/\*M?!\d*)*"
)
# trailing words that do not change what a statement does
_HARMLESS_TAIL = {"RESTRICT", "CASCADE", "ALGORITHM", "LOCK", "WAIT", "NOWAIT"}


def first_word(sql: str) -> str:
    """The statement's first keyword (upper case), skipping comments; "" if none."""
    m = _LEAD_RE.match(sql)
    rest = sql[m.end() if m else 0 :]
    w = re.match(r"[A-Za-z_]+", rest)
    return w.group(0).upper() if w else ""


def parse_statement(sql: str) -> Statement:
    """Parse one SQL statement into a statement object (``Ignored`` for non-DDL)."""
    w = first_word(sql)
    if w not in _DDL_WORDS:
        return Ignored(f"{w or 'empty'} statement")
    p = _Parser(sql)
    st = p.statement()
    if (
        not p.at_end()
        and not isinstance(st, (Ignored, CreateTable, AlterTable, CreateDatabase, AlterDatabase))
        and not (isinstance(st, ViewStmt) and st.action != "drop")
    ):
        t = p.peek()
        assert t is not None
        if t.upper not in _HARMLESS_TAIL:
            raise p.error("unexpected trailing text")
    return st


# --------------------------------------------------------------------------------------------
# Building ColumnInfo
# --------------------------------------------------------------------------------------------

_INT_WIDTH = {
    "tinyint": (4, 3),
    "smallint": (6, 5),
    "mediumint": (9, 8),
    "int": (11, 10),
    "bigint": (20, 20),
}
_TEXT_BY_SIZE = (("tinytext", 255), ("text", 65535), ("mediumtext", 16777215), ("longtext", 4294967295))
_BLOB_BY_SIZE = (("tinyblob", 255), ("blob", 65535), ("mediumblob", 16777215), ("longblob", 4294967295))
TEXT_MAX_BYTES = dict(_TEXT_BY_SIZE) | dict(_BLOB_BY_SIZE)
_TO_BINARY = {
    "char": "binary",
    "varchar": "varbinary",
    "tinytext": "tinyblob",
    "text": "blob",
    "mediumtext": "mediumblob",
    "longtext": "longblob",
}
CHARSET_TYPES = frozenset(
    {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json"}
)


def text_type_for_bytes(nbytes: int, binary: bool) -> str:
    """The smallest TEXT (or BLOB) type holding ``nbytes`` bytes."""
    for name, size in _BLOB_BY_SIZE if binary else _TEXT_BY_SIZE:
        if nbytes <= size:
            return name
    return "longblob" if binary else "longtext"


def build_column(cdef: ColumnDef, table_charset: tuple[str, str]) -> ColumnInfo:
    """Turn a parsed column definition into a ColumnInfo, as MariaDB 10.11 stores it."""
    t = cdef.type_name
    nums = [int(a) for a in cdef.args if a.isdigit()] if t not in ("enum", "set") else []
    length: int | None = None
    precision: int | None = None
    scale: int | None = None
    fsp = 0
    charset: str | None = None
    collation: str | None = None
    elements: tuple[str, ...] = ()
    unsigned = cdef.unsigned or cdef.zerofill
    if cdef.json_check and t == "longtext":
        t = "json"

    if t in CHARSET_TYPES:
        cs_in = cdef.charset
        if cdef.national:
            cs_in = "utf8mb3"
        resolved: tuple[str, str]
        if t == "json" and cs_in is None and cdef.collation is None and not cdef.json_check:
            # MariaDB's JSON is LONGTEXT in utf8mb4_bin whatever the table's charset
            resolved = ("utf8mb4", "utf8mb4_bin")
        else:
            explicit = resolve_charset(cs_in, cdef.collation, None)
            resolved = explicit if explicit is not None else table_charset
            if cdef.binary_collation and cdef.collation is None and resolved[0] != "binary":
                # the BINARY attribute picks the charset's _bin collation, it does not make the column binary
                resolved = (resolved[0], resolved[0] + "_bin")
        charset, collation = resolved
        if charset == "binary" and t in _TO_BINARY:
            t = _TO_BINARY[t]
            charset = collation = None

    if t in INT_TYPES:
        length = nums[0] if nums else _INT_WIDTH[t][1 if unsigned else 0]
    elif t == "decimal":
        precision = nums[0] if nums else 10
        scale = nums[1] if len(nums) > 1 else 0
    elif t in ("float", "double"):
        if len(nums) >= 2:
            precision, scale = nums[0], nums[1]
        elif len(nums) == 1 and t == "float":
            if nums[0] > 24:
                t = "double"
    elif t in ("datetime", "timestamp", "time"):
        fsp = nums[0] if nums else 0
    elif t == "year":
        length = nums[0] if nums and nums[0] == 2 else 4
    elif t in ("char", "binary"):
        length = nums[0] if nums else 1
    elif t in ("varchar", "varbinary"):
        if not nums:
            raise SchemaError(f"column {cdef.name!r}: {t.upper()} needs a length, e.g. {t.upper()}(255)")
        length = nums[0]
    elif t == "bit":
        length = nums[0] if nums else 1
    elif t in ("text", "blob") and nums:
        t = text_type_for_bytes(nums[0] * (mbmaxlen(charset) if t == "text" else 1), t == "blob")
    elif t in ("enum", "set"):
        elements = tuple(cdef.args)

    nullable = not cdef.not_null if cdef.not_null is not None else True
    if cdef.auto_increment or cdef.inline_primary:
        nullable = False
    col = ColumnInfo(
        name=cdef.name,
        type=t,
        unsigned=unsigned if t in INT_TYPES or t in ("decimal", "float", "double") else False,
        zerofill=cdef.zerofill if t in INT_TYPES or t in ("decimal", "float", "double") else False,
        length=length,
        precision=precision,
        scale=scale,
        fsp=fsp,
        charset=charset,
        collation=collation,
        nullable=nullable,
        elements=elements,
        generated=cdef.generated,
        auto_increment=cdef.auto_increment,
        comment=cdef.comment,
    )
    default: str | None = None
    if cdef.default is not None and not cdef.generated:
        default = normalize_default(col, cdef.default)
    return with_default(col, default)


def with_default(col: ColumnInfo, default: str | None) -> ColumnInfo:
    """A copy with a new DEFAULT; ``has_default`` follows the server (nullable columns default to NULL)."""
    from dataclasses import replace

    has = default is not None or (col.nullable and not col.generated and not col.auto_increment)
    return replace(col, default=default, has_default=has)


# --------------------------------------------------------------------------------------------
# DEFAULT values, normalised the way SHOW CREATE TABLE prints them
# --------------------------------------------------------------------------------------------


def normalize_default(col: ColumnInfo, dv: DefaultValue) -> str | None:
    """The DEFAULT of a column as the server prints it (strings unquoted); None for NULL."""
    with localcontext() as ctx:
        ctx.prec = 200  # DECIMAL(65,30) needs more than the default 28 digits
        return _normalize_default(col, dv)


def _normalize_default(col: ColumnInfo, dv: DefaultValue) -> str | None:
    if dv.kind == "null":
        return None
    if dv.kind == "expr":
        return dv.text
    text = dv.text
    if dv.lit == "hex":
        text = bytes.fromhex(text if len(text) % 2 == 0 else "0" + text).decode("latin-1")
        if col.type in INT_TYPES or col.type in ("bit", "decimal", "float", "double", "year"):
            text = str(int(dv.text or "0", 16))
    elif dv.lit == "bin":
        if col.type == "bit" or col.type in INT_TYPES or col.type in ("decimal", "float", "double", "year"):
            text = str(int(dv.text or "0", 2))
        else:
            n = int(dv.text or "0", 2)
            text = n.to_bytes(max(1, (len(dv.text) + 7) // 8), "big").decode("latin-1")
    t = col.type
    try:
        if t in INT_TYPES:
            return str(int(Decimal(text.strip() or "0").to_integral_value(ROUND_HALF_UP)))
        if t == "decimal":
            q = Decimal(1).scaleb(-(col.scale or 0))
            d = Decimal(text.strip() or "0").quantize(q, rounding=ROUND_HALF_UP)
            return format(d.copy_abs() if d == 0 else d, "f")
        if t in ("float", "double"):
            return format_real(float(Decimal(text.strip() or "0")), t, col.scale)
        if t == "bit":
            n = (
                int(Decimal(text))
                if dv.lit in ("num", "bool", "hex", "bin")
                else int.from_bytes(text.encode("latin-1"), "big")
            )
            return f"b'{n:b}'"
        if t == "year":
            return _norm_year(text, dv.lit)
        if t == "date":
            return _norm_date(text)
        if t in ("datetime", "timestamp"):
            return _norm_datetime(text, col.fsp)
        if t == "time":
            return _norm_time(text, col.fsp)
    except (InvalidOperation, ValueError, OverflowError):
        return text
    if t == "enum":
        return _norm_enum(text, dv.lit, col.elements)
    if t == "set":
        return _norm_set(text, dv.lit, col.elements)
    return text


def format_real(x: float, type_name: str, scale: int | None) -> str:
    """A FLOAT/DOUBLE value as MariaDB prints it (``my_gcvt``: %g-like, 6 digits for FLOAT)."""
    if scale is not None:
        if type_name == "float":
            x = struct.unpack("f", struct.pack("f", x))[0]
        d = Decimal(repr(x)).quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_EVEN)
        return format(d, "f")
    if x == 0:
        return "0"
    if type_name == "float":
        x = struct.unpack("f", struct.pack("f", x))[0]
        digits_str = f"{abs(x):.5e}"
    else:
        digits_str = repr(abs(x))
    d = Decimal(digits_str).normalize()
    _sign, digs, exp = d.as_tuple()
    digits = "".join(map(str, digs)).rstrip("0") or "0"
    assert isinstance(exp, int)
    decpt = len(digs) + exp  # position of the decimal point relative to the digits
    n = len(digits)
    neg = "-" if x < 0 else ""
    if -14 <= decpt <= 15 or (decpt > 15 and n > decpt):
        if decpt <= 0:
            s = "0." + "0" * (-decpt) + digits
        elif decpt >= n:
            s = digits + "0" * (decpt - n)
        else:
            s = digits[:decpt] + "." + digits[decpt:]
        return neg + s
    mant = digits[0] + ("." + digits[1:] if n > 1 else "")
    return f"{neg}{mant}e{decpt - 1}"


def _norm_year(text: str, lit: str) -> str:
    s = text.strip()
    n = int(Decimal(s))
    if lit == "str" and len(s) <= 2 and 0 <= n <= 99:
        return str(2000 + n if n < 70 else 1900 + n)
    if 1 <= n <= 69:
        return str(2000 + n)
    if 70 <= n <= 99:
        return str(1900 + n)
    return str(n) if n else "0000"


_DATE_RE = re.compile(r"^(\d{1,4})[-/.:](\d{1,2})[-/.:](\d{1,2})$")
_DT_RE = re.compile(
    r"^(\d{1,4})[-/.:](\d{1,2})[-/.:](\d{1,2})(?:[ T](\d{1,2})(?::(\d{1,2})(?::(\d{1,2})(?:\.(\d*))?)?)?)?$"
)
_TIME_RE = re.compile(r"^(-)?(?:(\d+) )?(\d{1,3})(?::(\d{1,2})(?::(\d{1,2}))?)?(?:\.(\d*))?$")


def _frac(frac: str | None, fsp: int) -> str:
    if fsp <= 0:
        return ""
    f = (frac or "")[:fsp].ljust(fsp, "0")
    return "." + f


def _norm_date(text: str) -> str:
    s = text.strip()
    m = _DT_RE.match(s)
    if m:
        return f"{int(m.group(1)):04d}-{int(m.group(2)):02d}-{int(m.group(3)):02d}"
    if s.isdigit() and len(s) == 8:
        return f"{s[:4]}-{s[4:6]}-{s[6:]}"
    return s


def _norm_datetime(text: str, fsp: int) -> str:
    s = text.strip()
    m = _DT_RE.match(s)
    if m:
        y, mo, d, h, mi, se, fr = m.groups()
        # extra fraction digits are cut, not rounded (time_round_mode=TRUNCATE)
        return (
            f"{int(y):04d}-{int(mo):02d}-{int(d):02d} {int(h or 0):02d}:{int(mi or 0):02d}:{int(se or 0):02d}"
            + _frac(fr, fsp)
        )
    if s.isdigit() and len(s) in (8, 14):
        s14 = s.ljust(14, "0")
        return f"{s14[:4]}-{s14[4:6]}-{s14[6:8]} {s14[8:10]}:{s14[10:12]}:{s14[12:14]}" + _frac("", fsp)
    return s


def _norm_time(text: str, fsp: int) -> str:
    s = text.strip()
    m = _TIME_RE.match(s)
    if m and (m.group(4) is not None or m.group(2) is not None):
        neg, days, h, mi, se, fr = m.groups()
        hours = int(h) + 24 * int(days or 0)
        return f"{neg or ''}{hours:02d}:{int(mi or 0):02d}:{int(se or 0):02d}" + _frac(fr, fsp)
    if re.match(r"^-?\d+(\.\d*)?$", s):
        neg = s.startswith("-")
        whole, _, fr = s.lstrip("-").partition(".")
        whole = whole.rjust(6, "0")
        return f"{'-' if neg else ''}{int(whole[:-4]):02d}:{whole[-4:-2]}:{whole[-2:]}" + _frac(fr, fsp)
    return s


def _norm_enum(text: str, lit: str, elements: tuple[str, ...]) -> str:
    if lit in ("num", "bool") and text.isdigit():
        i = int(text)
        if 1 <= i <= len(elements):
            return elements[i - 1]
        return text
    for e in elements:
        if e.lower() == text.lower():
            return e
    return text


def _norm_set(text: str, lit: str, elements: tuple[str, ...]) -> str:
    if lit in ("num", "bool") and text.isdigit():
        bits = int(text)
        return ",".join(e for k, e in enumerate(elements) if bits >> k & 1)
    wanted = {p.lower() for p in text.split(",") if p != ""}
    return ",".join(e for e in elements if e.lower() in wanted)
