"""The canal-json reference: strings, column values and the ``data``/``old`` objects in plain Python.

What every row message is made of, written for reading: ``json_str`` escapes a
string like easyjson, ``column_formatter`` turns one column value into its JSON
token, ``TableLayout`` holds what does not change from row to row (the column
keys and formatters, the message head, ``sqlType`` and ``mysqlType``), and
``render_columns`` writes the ``old`` and ``data`` objects of one row.

The C extension (``codec._canaljson``, bound in ``native``) writes the same
bytes and is what production runs; this module is the definition it is tested
against and the fallback when the extension is not built.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sparkcdc.codec.canal_types import UNSIGNED_PROMOTION, base_java_type, mysql_type
from sparkcdc.codec.values import canal_value, decimal_text, go_format_float
from sparkcdc.model.schema import BLOB_TYPES, INT_TYPES, ColumnInfo, TableInfo

# ------------------------------------------------------------------ easyjson strings

ESCAPES: dict[int, str] = {i: f"\\u{i:04x}" for i in range(0x20)}
"""Code point → its escape in a JSON string (easyjson's ``jwriter.String``); others are written as is."""
ESCAPES.update(
    {
        ord("\t"): "\\t",
        ord("\n"): "\\n",
        ord("\r"): "\\r",
        ord('"'): '\\"',
        ord("\\"): "\\\\",
        ord("<"): "\\u003c",
        ord(">"): "\\u003e",
        ord("&"): "\\u0026",
        0x2028: "\\u2028",
        0x2029: "\\u2029",
    }
)
# Lone surrogates stand for bytes that were not valid UTF-8: easyjson writes one
# U+FFFD per invalid byte (a surrogateescape'd byte is one byte; any other lone
# surrogate would have been three).
ESCAPES.update({c: "\\ufffd" for c in range(0xDC80, 0xDD00)})
ESCAPES.update({c: "\\ufffd" * 3 for c in range(0xD800, 0xE000) if not 0xDC80 <= c < 0xDD00})

_NEEDS_ESCAPE = re.compile('[\x00-\x1f"\\\\<>&\u2028\u2029\ud800-\udfff]')
_RARE = re.compile("[\x08\x0c\ud800-\udfff]")
_c_encode = json.encoder.encode_basestring  # differs from easyjson only as fixed in json_str


def json_str(s: str) -> str:
    """A JSON string literal escaped exactly like easyjson's ``jwriter.String`` (``ESCAPES``)."""
    if _NEEDS_ESCAPE.search(s) is None:
        return '"' + s + '"'
    if _RARE.search(s) is not None:  # \b, \f (json writes them short) and lone surrogates
        return '"' + s.translate(ESCAPES) + '"'
    out: str = _c_encode(s)
    if "<" in s:
        out = out.replace("<", "\\u003c")
    if ">" in s:
        out = out.replace(">", "\\u003e")
    if "&" in s:
        out = out.replace("&", "\\u0026")
    if "\u2028" in s:
        out = out.replace("\u2028", "\\u2028")
    if "\u2029" in s:
        out = out.replace("\u2029", "\\u2029")
    return out


# ------------------------------------------------------------------ column values

Formatter = Callable[[Any], str]
"""Turns a non-NULL column value into its JSON token (a quoted string)."""


def column_formatter(col: ColumnInfo) -> Formatter:
    """The formatter of one column's values.

    A value of the Python type ``ColumnInfo`` documents for the column type is
    written directly; any other value goes through ``values.canal_value``, which
    renders it or raises ``DecodeError`` naming it.
    """
    t = col.type

    def generic(v: Any) -> str:
        s = canal_value(v, col)
        return json_str(s) if s is not None else "null"

    if t in INT_TYPES or t in ("year", "bit"):

        def fmt_int(v: Any) -> str:
            return f'"{v}"' if type(v) is int else generic(v)

        return fmt_int
    if t == "float" or t == "double":
        bits = 32 if t == "float" else 64

        def fmt_float(v: Any) -> str:
            return '"' + go_format_float(v, bits) + '"' if type(v) is float else generic(v)

        return fmt_float
    if t == "decimal":
        scale = col.scale

        def fmt_decimal(v: Any) -> str:
            return '"' + decimal_text(v, scale) + '"' if type(v) is Decimal else generic(v)

        return fmt_decimal
    if t in BLOB_TYPES:

        def fmt_binary(v: Any) -> str:
            return json_str(v.decode("latin-1")) if type(v) is bytes else generic(v)

        return fmt_binary
    if t == "enum":
        return _enum_formatter(col, generic)
    if t == "set":
        return _set_formatter(col, generic)

    def fmt_str(v: Any) -> str:
        return json_str(v) if type(v) is str else generic(v)

    return fmt_str


def enum_tokens(col: ColumnInfo) -> dict[str, str]:
    """ENUM element name → its token: the 1-based index (``""``, MySQL's error value, is 0)."""
    tokens = {name: f'"{i}"' for i, name in enumerate(col.elements, 1)}
    tokens[""] = '"0"'
    return tokens


def _enum_formatter(col: ColumnInfo, generic: Formatter) -> Formatter:
    tokens = enum_tokens(col)

    def fmt_enum(v: Any) -> str:
        token = tokens.get(v) if type(v) is str else None
        return token if token is not None else generic(v)  # generic refuses an unknown name

    return fmt_enum


def _set_formatter(col: ColumnInfo, generic: Formatter) -> Formatter:
    bit = {name: 1 << i for i, name in enumerate(col.elements)}

    def fmt_set(v: Any) -> str:
        if type(v) is not str:
            return generic(v)
        mask = 0
        for name in v.split(",") if v else ():
            b = bit.get(name)
            if b is None:
                return generic(v)  # raises DecodeError naming the value
            mask |= b
        return f'"{mask}"'

    return fmt_set


# ------------------------------------------------------------------ a table's layout


@dataclass(slots=True)
class ColumnLayout:
    """One column of a row message: where its value is, its key and formatter, its ``sqlType``."""

    index: int
    key: str  # '"name":'
    fmt: Formatter
    java: int
    promotion: tuple[int, int] | None  # UNSIGNED: above this value, this java type
    handle: bool


class TableLayout:
    """Everything about a table's row messages that does not change from row to row."""

    def __init__(self, table: TableInfo, schema: str, name: str, full_type: bool) -> None:
        self.table = table
        self.schema = schema
        self.name = name
        handle = set(table.handle_key_index)
        self.cols = [
            ColumnLayout(
                index=i,
                key=json_str(c.name) + ":",
                fmt=column_formatter(c),
                java=base_java_type(c),
                promotion=UNSIGNED_PROMOTION.get(c.type) if c.unsigned else None,
                handle=i in handle,
            )
            for i, c in enumerate(table.columns)
        ]
        self.handle_cols = [c for c in self.cols if c.handle]
        self.head = (
            '{"id":0,"database":'
            + json_str(schema)
            + ',"table":'
            + json_str(name)
            + ',"pkNames":['
            + ",".join(json_str(n) for n in table.primary_key)
            + '],"isDdl":false,"type":"'
        )
        """The message up to the row's ``type`` value."""
        self._promotions = [(c.index, c.promotion[0]) for c in self.cols if c.promotion is not None]
        self._sql_types: dict[tuple[Any, ...], str] = {}
        self._static_sql_type = {
            False: self._sql_type_text(self.cols, set()),
            True: self._sql_type_text(self.handle_cols, set()),
        }
        types = [mysql_type(c, full_type) for c in table.columns]
        self.mysql_type = {
            only_handle: "{" + ",".join(c.key + json_str(types[c.index]) for c in cols) + "}"
            if cols
            else "null"
            for only_handle, cols in ((False, self.cols), (True, self.handle_cols))
        }
        """``mysqlType`` of all columns (False) or of the handle-key columns (True)."""

    @property
    def promotions(self) -> tuple[tuple[int, int], ...]:
        """(index, largest value of the signed type) of each UNSIGNED column: a value above it changes
        the row's ``sqlType`` (see ``sql_type``)."""
        return tuple(self._promotions)

    def static_sql_type(self, only_handle: bool) -> str:
        """The ``sqlType`` object of a row with no UNSIGNED value above its signed range."""
        return self._static_sql_type[only_handle]

    def columns(self, only_handle: bool) -> list[ColumnLayout]:
        """The columns a message lists: all, or only the handle-key columns."""
        return self.handle_cols if only_handle else self.cols

    def sql_type(self, image: tuple[Any, ...], only_handle: bool) -> str:
        """The ``sqlType`` object for one row image (an UNSIGNED column's code depends on its value)."""
        for i, limit in self._promotions:
            v = image[i]
            if v is not None and v > limit:
                break
        else:  # no UNSIGNED value above its signed range: the columns' own codes
            return self._static_sql_type[only_handle]
        promoted = tuple(i for i, limit in self._promotions if (v := image[i]) is not None and v > limit)
        key = (only_handle, promoted)
        text = self._sql_types.get(key)
        if text is None:
            text = self._sql_types[key] = self._sql_type_text(self.columns(only_handle), set(promoted))
        return text

    @staticmethod
    def _sql_type_text(cols: list[ColumnLayout], promoted: set[int]) -> str:
        if not cols:
            return "null"
        codes = (c.promotion[1] if c.promotion is not None and c.index in promoted else c.java for c in cols)
        return "{" + ",".join(f"{c.key}{code}" for c, code in zip(cols, codes, strict=True)) + "}"


# ------------------------------------------------------------------ the columns of a row


def column_tokens(cols: list[ColumnLayout], image: tuple[Any, ...]) -> list[str]:
    """``'"name":token'`` of each column of one row image."""
    return [c.key + ("null" if (v := image[c.index]) is None else c.fmt(v)) for c in cols]


def render_columns(
    cols: list[ColumnLayout],
    head: str,
    before: tuple[Any, ...] | None,
    image: tuple[Any, ...],
    changed_only: bool,
    tail: str,
) -> bytes:
    """A row message from its ``head`` (up to ``"old":``) and ``tail`` (after ``data``'s columns).

    ``old`` is ``null`` without ``before``; with it, ``[{…}]`` of its columns,
    only those whose token differs from ``image``'s when ``changed_only``.
    ``data`` is ``[{…}]`` of ``image``'s columns (the ``}]`` is in ``tail``).
    """
    if before is None:
        old = "null"
    else:
        old_tokens = column_tokens(cols, before)
        if changed_only:
            new_tokens = column_tokens(cols, image)
            old_tokens = [o for o, d in zip(old_tokens, new_tokens, strict=True) if o != d]
            return f'{head}[{{{",".join(old_tokens)}}}],"data":[{{{",".join(new_tokens)}{tail}'.encode()
        old = "[{" + ",".join(old_tokens) + "}]"
    return f'{head}{old},"data":[{{{",".join(column_tokens(cols, image))}{tail}'.encode()
