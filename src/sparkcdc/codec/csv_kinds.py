"""How each kind of column becomes a CSV field: in Python for the encoder, in SQL for the upstream.

``column_kind`` sorts a column into a ``ColumnKind``; ``KINDS`` holds, for each kind, the
one rendering rule of its fields twice over: ``python`` builds the formatter
``CSVEncoder`` calls per value, ``sql`` builds the expression that makes the upstream
write the same text for the snapshot (``csv_sql``), or refuses when it cannot.
``CSVDecoder`` parses fields back by the same kinds.

Fields (TiCDC's ``pkg/sink/codec/csv``): integers as digits, floats as Go's shortest
``%v``, DECIMAL as a quoted fixed-notation string, date/time, text, ENUM/SET names and
JSON as quoted strings, binary as quoted base64 or lower-case hex, NULL as the null
string, unquoted. With an empty quote strings are backslash-escaped instead.
"""

from __future__ import annotations

import binascii
import enum
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sparkcdc.codec.values import decimal_text, go_g_format
from sparkcdc.model.schema import BLOB_TYPES, INT_TYPES, TEXT_TYPES, ColumnInfo

Formatter = Callable[[Any], str]
"""Renders one value of a column (``None`` included) as its final field text."""


class ColumnKind(enum.Enum):
    """What decides how a column's values are rendered."""

    INT = "int"  # TINYINT … BIGINT
    BIT_YEAR = "bit_year"  # integers too; the upstream's own text of them is not their number
    FLOAT = "float"  # float32 held in a Python float
    DOUBLE = "double"
    DECIMAL = "decimal"
    TEMPORAL = "temporal"  # DATE, DATETIME, TIME, TIMESTAMP: their text, quoted
    TEXT = "text"  # CHAR … LONGTEXT, ENUM, SET, JSON: text that may hold anything
    BINARY = "binary"  # BINARY, VARBINARY, BLOBs: base64 or hex
    OTHER = "other"  # GEOMETRY and the rest: their text, quoted


_TEMPORAL = frozenset({"date", "datetime", "time", "timestamp"})
_TEXT = TEXT_TYPES | {"enum", "set", "json"}


def column_kind(col: ColumnInfo) -> ColumnKind:
    """The kind of ``col``, from its type."""
    t = col.type
    if t in INT_TYPES:
        return ColumnKind.INT
    if t in ("bit", "year"):
        return ColumnKind.BIT_YEAR
    if t == "float":
        return ColumnKind.FLOAT
    if t == "double":
        return ColumnKind.DOUBLE
    if t == "decimal":
        return ColumnKind.DECIMAL
    if t in BLOB_TYPES:
        return ColumnKind.BINARY
    if t in _TEMPORAL:
        return ColumnKind.TEMPORAL
    if t in _TEXT:
        return ColumnKind.TEXT
    return ColumnKind.OTHER


# ------------------------------------------------------------------ Python


@dataclass(frozen=True)
class FieldStyle:
    """The ``[sink.csv]`` options a field's text depends on."""

    quote: str
    delimiter: str
    null: str
    binary_encoding: str

    def string(self) -> Callable[[str], str]:
        """Text as a string field: quoted (the quote doubled inside) or, with no quote, escaped."""
        if self.quote:
            q, qq = self.quote, self.quote * 2

            def quoted(s: str) -> str:
                return q + s.replace(q, qq) + q

            return quoted
        return backslash_escaper(self.delimiter)

    def binary(self) -> Callable[[bytes], str]:
        """The text of a binary value: lower-case hex or base64 (no line breaks)."""
        if self.binary_encoding == "hex":
            return bytes.hex
        b2a = binascii.b2a_base64

        def base64(v: bytes) -> str:
            return b2a(v, newline=False).decode("ascii")

        return base64


def backslash_escaper(delimiter: str) -> Callable[[str], str]:
    """Backslash-escape ``\\``, CR, LF and the delimiter (each of its characters)."""
    escaped_delim = "".join("\\" + ch for ch in delimiter)
    pattern = re.compile(re.escape(delimiter) + r"|[\\\r\n]")
    repl = {"\\": "\\\\", "\r": "\\r", "\n": "\\n", delimiter: escaped_delim}

    def sub(m: re.Match[str]) -> str:
        return repl[m.group()]

    def escape(s: str) -> str:
        if "\\" in s or "\r" in s or "\n" in s or delimiter in s:
            return pattern.sub(sub, s)
        return s

    return escape


def column_formatter(col: ColumnInfo, style: FieldStyle) -> Formatter:
    """The formatter of ``col``'s values: its kind's rule for the type the capture gives it, else by value type."""
    return KINDS[column_kind(col)].python(col, style, _by_value_type(col, style))


def _by_value_type(col: ColumnInfo, style: FieldStyle) -> Formatter:
    """NULL, and a value of another type than the kind's own, rendered by the value's type."""
    null, string, binary = style.null, style.string(), style.binary()
    bits = 32 if col.type == "float" else 64
    scale = col.scale

    def field(v: Any) -> str:
        if v is None:
            return null
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int):
            return str(v)
        if isinstance(v, float):
            return go_g_format(v, bits)
        if isinstance(v, bytes | bytearray | memoryview):
            return string(binary(bytes(v)))
        if isinstance(v, Decimal):
            return string(decimal_text(v, scale))
        return string(str(v))

    return field


# Each builder below returns the formatter of one kind: its own value type on the first
# test, anything else (NULL included) to ``other``.


def _integer(col: ColumnInfo, style: FieldStyle, other: Formatter) -> Formatter:
    def field(v: Any) -> str:
        return str(v) if type(v) is int else other(v)

    return field


_FLOAT32_TEXT: dict[float, str] = {}


def _float32(col: ColumnInfo, style: FieldStyle, other: Formatter) -> Formatter:
    def field(v: Any) -> str:
        if type(v) is not float:
            return other(v)
        if v == 0.0 or v != v:  # ±0 share a key, NaN finds none: not remembered
            return go_g_format(v, 32)
        text = _FLOAT32_TEXT.get(v)
        if text is None:
            if len(_FLOAT32_TEXT) >= 65536:
                _FLOAT32_TEXT.clear()
            text = _FLOAT32_TEXT[v] = go_g_format(v, 32)
        return text

    return field


DOUBLE_FIXED_MIN = 1e-4
"""Below this magnitude (0 aside) Go's ``%v`` of a double has an exponent (so has ``repr``)."""
DOUBLE_FIXED_MAX = 1e6
"""From this magnitude on Go's ``%v`` of a double has an exponent (``repr`` has none up to 1e16)."""


def _double(col: ColumnInfo, style: FieldStyle, other: Formatter) -> Formatter:
    def field(v: Any) -> str:
        if type(v) is not float:
            return other(v)
        if -DOUBLE_FIXED_MAX < v < DOUBLE_FIXED_MAX:
            text = repr(v)  # the same shortest digits as Go; fixed notation unless below 1e-4
            if "e" not in text:
                return text[:-2] if text[-2:] == ".0" else text
        return go_g_format(v, 64)

    return field


def _decimal(col: ColumnInfo, style: FieldStyle, other: Formatter) -> Formatter:
    string, scale = style.string(), col.scale

    def field(v: Any) -> str:
        return string(decimal_text(v, scale)) if type(v) is Decimal else other(v)

    return field


def _text(col: ColumnInfo, style: FieldStyle, other: Formatter) -> Formatter:
    if not style.quote:
        escape = backslash_escaper(style.delimiter)

        def escaped(v: Any) -> str:
            return escape(v) if type(v) is str else other(v)

        return escaped
    q, qq = style.quote, style.quote * 2

    def quoted(v: Any) -> str:
        return f"{q}{v.replace(q, qq)}{q}" if type(v) is str else other(v)

    return quoted


def _binary(col: ColumnInfo, style: FieldStyle, other: Formatter) -> Formatter:
    string, binary = style.string(), style.binary()

    def field(v: Any) -> str:
        return string(binary(v)) if type(v) is bytes else other(v)

    return field


# ------------------------------------------------------------------ SQL


def sql_string(text: str) -> str:
    """A utf8mb4 string literal of ``text`` in hex: no escaping, whatever the sql_mode, and no ``%``."""
    return f"_utf8mb4 X'{text.encode('utf-8', 'surrogateescape').hex()}'"


@dataclass(frozen=True)
class SQLStyle:
    """What a column's SQL field depends on besides the column."""

    quote: str
    binary_encoding: str
    utc: bool
    """The TIMESTAMP text of the reading session (in UTC) is the encoder's."""


@dataclass(frozen=True)
class SQLField:
    """A non-NULL value's field as ``CONCAT`` arguments."""

    value: str
    exact: str = ""
    """A predicate true for the rows whose field ``value`` renders exactly ("": every row)."""


_NUMERIC_TEXT = "0123456789-:. "
"""Every character of the upstream's text of a DECIMAL or a date/time."""
_HEX_TEXT = "0123456789abcdef"
_BASE64_TEXT = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="


def _sql_quoted(expr: str, style: SQLStyle, alphabet: str | None = None) -> str:
    """``expr``'s text as a quoted field; the quote is doubled unless ``alphabet`` (all the text can hold) lacks it."""
    q = sql_string(style.quote)
    if alphabet is not None and style.quote not in alphabet:
        return f"{q}, {expr}, {q}"
    return f"{q}, REPLACE({expr}, {q}, {sql_string(style.quote * 2)}), {q}"


# ``CONCAT`` renders a column with the same text as ``SELECT`` does (val_str); the
# conversions below are only where that text is not yet what the encoder writes.


def _integer_sql(col: ColumnInfo, ident: str, style: SQLStyle) -> SQLField | None:
    return SQLField(ident)


def _bit_year_sql(col: ColumnInfo, ident: str, style: SQLStyle) -> SQLField | None:
    return SQLField(f"{ident} + 0")


def _refused_sql(col: ColumnInfo, ident: str, style: SQLStyle) -> SQLField | None:
    return None


def _double_sql(col: ColumnInfo, ident: str, style: SQLStyle) -> SQLField | None:
    if col.scale is not None:  # DOUBLE(M,D): the upstream pads to D digits
        return None
    # The upstream never writes an exponent where Go's %v does: those rows are read the ordinary way.
    return SQLField(
        ident,
        f"({ident} IS NULL OR {ident} = 0 OR ABS({ident}) >= {DOUBLE_FIXED_MIN!r} "
        f"AND ABS({ident}) < {DOUBLE_FIXED_MAX!r})",
    )


def _decimal_sql(col: ColumnInfo, ident: str, style: SQLStyle) -> SQLField | None:
    return SQLField(_sql_quoted(ident, style, _NUMERIC_TEXT))


def _temporal_sql(col: ColumnInfo, ident: str, style: SQLStyle) -> SQLField | None:
    if col.type == "timestamp" and not style.utc:
        return None
    return SQLField(_sql_quoted(ident, style, _NUMERIC_TEXT))


def _text_sql(col: ColumnInfo, ident: str, style: SQLStyle) -> SQLField | None:
    text = ident if (col.charset or "utf8mb4") == "utf8mb4" else f"CONVERT({ident} USING utf8mb4)"
    return SQLField(_sql_quoted(text, style))


def _binary_sql(col: ColumnInfo, ident: str, style: SQLStyle) -> SQLField | None:
    if style.binary_encoding == "hex":
        return SQLField(_sql_quoted(f"LOWER(HEX({ident}))", style, _HEX_TEXT))
    text = f"REPLACE(TO_BASE64({ident}), {sql_string(chr(10))}, {sql_string('')})"
    return SQLField(_sql_quoted(text, style, _BASE64_TEXT))


def column_sql(col: ColumnInfo, ident: str, style: SQLStyle) -> SQLField | None:
    """The upstream's field of ``col`` (quoted identifier ``ident``) when not NULL, or None if it cannot render it."""
    return KINDS[column_kind(col)].sql(col, ident, style)


# ------------------------------------------------------------------ the table


@dataclass(frozen=True)
class KindRule:
    """How the fields of one kind of column are rendered."""

    python: Callable[[ColumnInfo, FieldStyle, Formatter], Formatter]
    """The encoder's formatter, given the formatter of NULL and of values of other types."""
    sql: Callable[[ColumnInfo, str, SQLStyle], SQLField | None]
    """The upstream's field of a non-NULL value, or None where it cannot give the encoder's text."""


KINDS: dict[ColumnKind, KindRule] = {
    ColumnKind.INT: KindRule(_integer, _integer_sql),
    ColumnKind.BIT_YEAR: KindRule(_integer, _bit_year_sql),
    ColumnKind.FLOAT: KindRule(_float32, _refused_sql),  # the upstream's FLOAT text is not Go's float32 %v
    ColumnKind.DOUBLE: KindRule(_double, _double_sql),
    ColumnKind.DECIMAL: KindRule(_decimal, _decimal_sql),
    ColumnKind.TEMPORAL: KindRule(_text, _temporal_sql),
    ColumnKind.TEXT: KindRule(_text, _text_sql),
    ColumnKind.BINARY: KindRule(_binary, _binary_sql),
    ColumnKind.OTHER: KindRule(_text, _refused_sql),
}
