"""Column and index definitions as written in CREATE TABLE and ALTER TABLE, and DEFAULT expressions."""

from __future__ import annotations

from typing import Literal

from sparkcdc.capture.ddl.lexer import Token, TokenCursor, clip_sql, literal_end, quote_ident
from sparkcdc.capture.ddl.statements import ColumnDef, DefaultValue, IndexDef, PeriodDef, TableName
from sparkcdc.errors import SchemaError

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
    # MariaDB's data-type plugins: 16/4/16 bytes, logged as BINARY(n), captured as their text
    "UUID",
    "INET4",
    "INET6",
}
_UNSUPPORTED_TYPES = {"VECTOR", "ROW", "XMLTYPE"}


class DefinitionParser(TokenCursor):
    """Reads table names, column definitions (type, attributes, DEFAULT) and index definitions."""

    def table_name(self) -> TableName:
        first = self.ident("a table name")
        if self.is_op(".") and self.peek(1) is not None and self.peek(1).kind in ("id", "qid"):  # type: ignore[union-attr]
            self.i += 1
            return TableName(first, self.ident("a table name"))
        return TableName(None, first)

    def create_item(self) -> ColumnDef | IndexDef | PeriodDef | None:
        idx = self.index_def()
        if idx is not None:
            return idx
        if self.is_kw("PERIOD", "FOR"):  # not a column named period
            self.i += 1
            return self.period_def()
        if self.is_kw("CONSTRAINT") or self.is_kw("CHECK"):
            # a table CHECK constraint: no shape change
            self.skip_rest_of_spec()
            return None
        name = self.ident("a column name")
        return self.column_def(name)

    def period_def(self) -> PeriodDef | None:
        """``PERIOD FOR name (start, end)`` from ``FOR`` on (after ``PERIOD [IF [NOT] EXISTS]``);
        None for ``SYSTEM_TIME``, system versioning's period (no shape change)."""
        self.expect_kw("FOR")
        if self.is_kw("SYSTEM_TIME"):
            self.skip_rest_of_spec()
            return None
        name = self.ident("a period name")
        self.expect_op("(")
        start = self.ident("the period's start column")
        self.expect_op(",")
        end = self.ident("the period's end column")
        self.expect_op(")")
        return PeriodDef(name, start, end)

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
        parts, functional, period = self.index_parts()
        if kind == "foreign":
            self.skip_references()
            return IndexDef(kind, name or constraint, parts, False, ine)
        using_hash = self.index_tail() or using_hash
        if kind == "primary":
            name = "PRIMARY"
        elif name is None:
            name = constraint
        return self.with_period(IndexDef(kind, name, parts, using_hash, ine, functional), period)

    def with_period(self, idef: IndexDef, period: str | None) -> IndexDef:
        """``idef`` ending with ``period WITHOUT OVERLAPS``. The catalog resolves the period to its end
        and start columns (``WorkingTable.add_index``), after the statement's own columns and periods,
        as MariaDB does: a key may name a period its statement defines later."""
        if period is not None:
            idef.without_overlaps = True
            idef.period = period
        return idef

    def skip_index_type(self) -> bool:
        using_hash = False
        while self.is_kw("USING") or self.is_kw("TYPE"):
            self.i += 1
            using_hash = self.next().upper == "HASH" or using_hash
        return using_hash

    def index_parts(self) -> tuple[list[tuple[str, int | None]], bool, str | None]:
        """The column parts of a key part list, whether it has functional parts (MySQL 8's
        ``((expr))``, skipped: they name no column) and the period it ends with, ``period WITHOUT
        OVERLAPS`` (MariaDB 10.5+; ``with_period`` records it)."""
        self.expect_op("(")
        parts: list[tuple[str, int | None]] = []
        functional = False
        period: str | None = None
        while True:
            if self.is_op("("):
                self.skip_parens()
                functional = True
                self.accept_kw("ASC") or self.accept_kw("DESC")
                if self.accept_op(","):
                    continue
                self.expect_op(")")
                break
            col = self.ident("an index column")
            length: int | None = None
            if self.accept_op("("):
                length = int(self.next().value)
                self.expect_op(")")
            self.accept_kw("ASC") or self.accept_kw("DESC")
            if self.accept_kw("WITHOUT", "OVERLAPS"):
                period = col  # an application-time period, always the last part
            else:
                parts.append((col, length))
            if self.accept_op(","):
                continue
            self.expect_op(")")
            break
        return parts, functional, period

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
                f"{clip_sql(self.sql)!r}; use a standard MySQL type"
            )
        else:
            raise self.error(f"unknown type {t.value!r} for column {col.name!r}")
        col.type_name = base
        if self.is_op("("):
            inner = self.skip_parens()
            if base in ("enum", "set"):
                elements = [x for x in inner if x.kind in ("str", "hex", "bin")]
                col.args = [_element_text(x) for x in elements]
                col.byte_elements = [x.kind != "str" for x in elements]
                col.string_literals = [
                    (x.pos, literal_end(self.sql, x), x.value)
                    for k, x in enumerate(inner)
                    if x.kind == "str" and not (k and inner[k - 1].upper.startswith("_"))
                ]
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
            if not (
                self._column_type_attr(col, w)
                or self._column_null_default_key_attr(col, w)
                or self._column_other_attr(col, w)
            ):
                break
        return col

    def _column_type_attr(self, col: ColumnDef, w: str) -> bool:
        """Sign, ZEROFILL, BINARY, charset or collation; False (nothing consumed) if none."""
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
        else:
            return False
        return True

    def _column_null_default_key_attr(self, col: ColumnDef, w: str) -> bool:
        """NULL, DEFAULT, ON UPDATE, AUTO_INCREMENT or an inline key; False (nothing consumed) if none."""
        if self.accept_kw("NOT", "NULL"):
            col.not_null = True
        elif w == "NULL":
            self.i += 1
            col.not_null = False
        elif w == "DEFAULT":
            self.i += 1
            first = self.i
            col.default = self.default_value()
            if col.default.lit == "str" and self.toks[first].kind == "str":
                end = literal_end(self.sql, self.toks[self.i - 1])
                col.string_literals.append((self.toks[first].pos, end, col.default.text))
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
        else:
            return False
        return True

    def _column_other_attr(self, col: ColumnDef, w: str) -> bool:
        """COMMENT, storage options, GENERATED, CHECK or REFERENCES; False (nothing consumed) if none."""
        if w == "COMMENT":
            self.i += 1
            col.comment = self.next().value
        elif w in ("INVISIBLE", "VISIBLE"):
            self.i += 1
        elif self.accept_kw("WITH", "SYSTEM", "VERSIONING") or self.accept_kw(
            "WITHOUT", "SYSTEM", "VERSIONING"
        ):
            pass
        elif w in ("COLUMN_FORMAT", "STORAGE", "REF_SYSTEM_ID", "SRID"):  # SRID: MySQL 8 spatial columns
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
            if self.accept_kw("CONSTRAINT") and not self.is_kw("CHECK") and not self.is_kw("REFERENCES"):
                self.next()
            if self.is_kw("REFERENCES"):
                # [CONSTRAINT name] REFERENCES ... on a column: MariaDB parses it and ignores it
                self.skip_references()
                col.references = True
                return True
            self.expect_kw("CHECK")
            inner = self.skip_parens()
            if _is_json_valid_of(inner, col.name):
                col.json_check = True
        elif w == "REFERENCES":
            self.skip_references()
            col.references = True
        else:
            return False
        return True

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
            return DefaultValue("literal", t.value, t.kind)
        if t.kind == "id":
            w = t.upper
            nxt = self.peek(1)
            if w.startswith("_") and nxt is not None and nxt.kind in ("str", "hex", "bin"):
                self.i += 2
                return DefaultValue("literal", nxt.value, nxt.kind)
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
        if t.kind == "qid":
            # DEFAULT `other_column` (MariaDB 10.2+: a default taken from an earlier column)
            self.i += 1
            return _expr_default([t])
        raise self.error("unsupported DEFAULT value")


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
        return DefaultValue("literal", toks[0].value, toks[0].kind)
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


def _element_text(t: Token) -> str:
    """An ENUM/SET element: a string as written; a hex or bit literal's bytes, one code point per byte."""
    if t.kind == "str":
        return t.value
    if t.kind == "hex":
        digits = t.value if len(t.value) % 2 == 0 else "0" + t.value
        return bytes.fromhex(digits).decode("latin1")
    bits = t.value or "0"
    return int(bits, 2).to_bytes((len(bits) + 7) // 8, "big").decode("latin1")


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
