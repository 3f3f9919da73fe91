"""TiCDC's storage-sink CSV (``pkg/sink/codec/csv``): encoder beside decoder.

A record is ``op, table, schema[, commit-ts][, is-update][, handle-key], values…``
followed by the terminator. Strings are quoted (the quote doubled inside) or,
with an empty quote, backslash-escaped (``\\``, CR, LF and the delimiter);
other values are Go's ``%v`` (ints, shortest-``'g'`` floats, ``true``/``false``);
NULL is the null string, never quoted. DECIMAL, date/time and JSON are quoted
strings, ENUM/SET their names, binary base64 or lower-case hex.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from types import CodeType
from typing import Any

from sparkcdc.codec.values import decimal_text, go_g_format, to_float32
from sparkcdc.config.replica import CSVConfig, ReplicaConfig
from sparkcdc.errors import ConfigError, DecodeError
from sparkcdc.model.events import Op, RowChange
from sparkcdc.model.schema import BLOB_TYPES, INT_TYPES, ColumnInfo, TableInfo

HEADER_OPERATION = "ticdc-meta$operation"
HEADER_TABLE = "ticdc-meta$table"
HEADER_SCHEMA = "ticdc-meta$schema"
HEADER_COMMIT_TS = "ticdc-meta$commit-ts"
HEADER_IS_UPDATE = "ticdc-meta$is-update"

_ENCODING_ERRORS = "surrogateescape"  # bytes that were not UTF-8 upstream travel through unchanged


def validate_csv_config(csv: CSVConfig, *, delete_only_output_handle_key_columns: bool = False) -> None:
    """Reject what TiCDC rejects in ``[sink.csv]`` (ConfigError names the value and the fix)."""
    quote, delim = csv.quote, csv.delimiter
    if len(quote.encode("utf-8")) > 1:
        raise ConfigError(
            f"csv config quote contains more than one character: quote={quote!r}; "
            'set [sink.csv] quote to a single character, or to "" to escape with backslashes'
        )
    if quote in ("\r", "\n"):
        raise ConfigError(
            f"csv config quote cannot be line break character: quote={quote!r}; use e.g. quote = '\"'"
        )
    if not delim:
        raise ConfigError("csv config delimiter cannot be empty: delimiter=''; use e.g. delimiter = ','")
    if len(delim.encode("utf-8")) > 3:
        raise ConfigError(
            f"csv config delimiter contains more than three characters, note that escape sequences "
            f"can only be used in double quotes in toml configuration items: delimiter={delim!r}; "
            "use a delimiter of 1 to 3 bytes"
        )
    if "\r" in delim or "\n" in delim:
        raise ConfigError(
            f"csv config delimiter contains line break characters: delimiter={delim!r}; "
            "CR and LF are reserved for the terminator"
        )
    if quote and any(ch in quote for ch in delim):
        raise ConfigError(
            f"csv config quote and delimiter has common characters which is not allowed: "
            f"quote={quote!r}, delimiter={delim!r}; choose a quote that does not occur in the delimiter"
        )
    if csv.binary_encoding_method not in ("hex", "base64"):
        raise ConfigError(
            f"csv config binary-encoding-method can only be hex or base64: "
            f"binary-encoding-method={csv.binary_encoding_method!r}"
        )
    if delete_only_output_handle_key_columns:
        raise ConfigError(
            "CSV protocol always output all columns for the delete event, do not set "
            "`delete-only-output-handle-key-columns` to true (got true in [sink])"
        )


# ------------------------------------------------------------------ encoder

_Render = Callable[[Any], str]
"""Renders a non-NULL value as its final CSV field text (quoted/escaped as needed)."""


class CSVEncoder:
    """Encodes row changes as TiCDC CSV records."""

    def __init__(
        self,
        csv: CSVConfig | None = None,
        terminator: str = "\r\n",
        include_commit_ts: bool | None = None,
        output_old_value: bool | None = None,
        output_handle_key: bool | None = None,
        *,
        delete_only_output_handle_key_columns: bool = False,
    ) -> None:
        csv = csv or CSVConfig()
        validate_csv_config(csv, delete_only_output_handle_key_columns=delete_only_output_handle_key_columns)
        self.csv = csv
        self.terminator = terminator
        self.delimiter = csv.delimiter
        self.quote = csv.quote
        self.null = csv.null
        self.include_commit_ts = csv.include_commit_ts if include_commit_ts is None else include_commit_ts
        self.output_old_value = csv.output_old_value if output_old_value is None else output_old_value
        self.output_handle_key = csv.output_handle_key if output_handle_key is None else output_handle_key
        self.output_field_header = csv.output_field_header
        self.binary_encoding = csv.binary_encoding_method
        if self.quote:
            q, qq = self.quote, self.quote + self.quote
            self.string: Callable[[str], str] = lambda s: q + s.replace(q, qq) + q
        else:
            self.string = _escaper(self.delimiter)
        self._renderers: dict[int, tuple[TableInfo, list[_Render]]] = {}
        self._compiled: dict[int, tuple[TableInfo, Callable[[RowChange], bytes]]] = {}

    @classmethod
    def from_config(cls, cfg: ReplicaConfig) -> CSVEncoder:
        """Build from ``[sink]`` and ``[sink.csv]``, validating them like TiCDC."""
        return cls(
            cfg.sink.csv,
            cfg.sink.terminator,
            delete_only_output_handle_key_columns=cfg.sink.delete_only_output_handle_key_columns,
        )

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_renderers"] = {}
        state["_compiled"] = {}
        state.pop("string", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("_compiled", {})
        if self.quote:
            q, qq = self.quote, self.quote + self.quote
            self.string = lambda s: q + s.replace(q, qq) + q
        else:
            self.string = _escaper(self.delimiter)

    # -------------------------------------------------------------- rendering

    def _renderer(self, col: ColumnInfo) -> _Render:
        t = col.type
        string = self.string
        if t in INT_TYPES or t in ("year", "bit"):
            return lambda v: str(v) if type(v) is int else self._fallback(v, col)
        if t == "float" or t == "double":
            bits = 32 if t == "float" else 64
            return lambda v: go_g_format(v, bits) if type(v) is float else self._fallback(v, col)
        if t == "decimal":
            scale = col.scale
            return lambda v: string(decimal_text(v, scale)) if type(v) is Decimal else self._fallback(v, col)
        if t in BLOB_TYPES:
            enc = self._binary
            return lambda v: string(enc(v)) if type(v) is bytes else self._fallback(v, col)
        return lambda v: string(v) if type(v) is str else self._fallback(v, col)

    def _binary(self, v: bytes) -> str:
        if self.binary_encoding == "hex":
            return v.hex()
        return base64.b64encode(v).decode("ascii")

    def _fallback(self, v: Any, col: ColumnInfo) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int):
            return str(v)
        if isinstance(v, float):
            return go_g_format(v, 32 if col.type == "float" else 64)
        if isinstance(v, bytes | bytearray | memoryview):
            return self.string(self._binary(bytes(v)))
        if isinstance(v, Decimal):
            return self.string(decimal_text(v, col.scale))
        return self.string(str(v))

    def _table_renderers(self, table: TableInfo) -> list[_Render]:
        entry = self._renderers.get(id(table))
        if entry is None or entry[0] is not table:
            if len(self._renderers) > 4096:
                self._renderers.clear()
            entry = (table, [self._renderer(c) for c in table.columns])
            self._renderers[id(table)] = entry
        return entry[1]

    def _handle_key(self, image: tuple[Any, ...], table: TableInfo) -> str:
        idx = table.handle_key_index
        if not idx:
            return self.null
        if len(idx) == 1 and table.columns[idx[0]].type in INT_TYPES:
            return self.string(str(image[idx[0]]))
        parts = []
        for i in idx:
            v = image[i]
            parts.append(self._binary(v) if isinstance(v, bytes) else ("" if v is None else str(v)))
        return self.string("{" + ", ".join(parts) + "}")

    def _handle_key_fn(self, table: TableInfo) -> Callable[[tuple[Any, ...]], str]:
        """``_handle_key`` for one table, its key positions looked up once."""
        idx = table.handle_key_index
        binary, string = self._binary, self.string

        def handle_key(image: tuple[Any, ...]) -> str:
            parts = []
            for i in idx:
                v = image[i]
                parts.append(binary(v) if isinstance(v, bytes) else ("" if v is None else str(v)))
            return string("{" + ", ".join(parts) + "}")

        return handle_key

    def _record_reference(
        self, op: str, row: RowChange, table: TableInfo, image: tuple[Any, ...], is_update: bool
    ) -> str:
        """One record rendered value by value (the reference the compiled encoders must equal)."""
        d = self.delimiter
        s = self.string
        fields = [s(op), s(row.table), s(row.schema)]
        if self.include_commit_ts:
            fields.append(str(row.commit_ts))
        if self.output_old_value:
            fields.append("true" if is_update else "false")
        if self.output_handle_key:
            fields.append(self._handle_key(image, table))
        null = self.null
        for render, v in zip(self._table_renderers(table), image, strict=True):
            fields.append(null if v is None else render(v))
        return d.join(fields) + self.terminator

    def encode_row(self, row: RowChange, table: TableInfo) -> bytes:
        """One record, or two (D then I, both is-update) for an UPDATE with output-old-value."""
        entry = self._compiled.get(id(table))
        if entry is None or entry[0] is not table:
            return self.row_encoder(table)(row)
        return entry[1](row)

    def encode_rows(self, rows: Iterable[RowChange], table: TableInfo) -> list[bytes]:
        """``encode_row`` for each row of one table (the compiled encoder is looked up once)."""
        return list(map(self.row_encoder(table), rows))

    def row_encoder(self, table: TableInfo) -> Callable[[RowChange], bytes]:
        """The compiled ``encode_row`` for one table shape (generated on first use, then cached)."""
        entry = self._compiled.get(id(table))
        if entry is None or entry[0] is not table:
            if len(self._compiled) > 4096:
                self._compiled.clear()
            entry = (table, _compile_row_encoder(self, table))
            self._compiled[id(table)] = entry
        return entry[1]

    def encode_row_reference(self, row: RowChange, table: TableInfo) -> bytes:
        """``encode_row`` rendered value by value: the reference the compiled encoders are tested against."""
        if len(table.columns) == 0:
            raise DecodeError(f"table {row.schema}.{row.table} has no columns; cannot encode a CSV row")
        if row.op == "D":
            image = row.before
        else:
            image = row.after
        if image is None:
            raise DecodeError(
                f"{row.op} row change for {row.schema}.{row.table} at commit_ts {row.commit_ts} has no "
                "row image; the capture must emit full row images"
            )
        if len(image) != len(table.columns):
            raise DecodeError(
                f"row for {row.schema}.{row.table} has {len(image)} values but the table has "
                f"{len(table.columns)} columns at version {table.version}"
            )
        if row.op == "U":
            if self.output_old_value and row.before is not None:
                return (
                    self._record_reference("D", row, table, row.before, True)
                    + self._record_reference("I", row, table, image, True)
                ).encode("utf-8", _ENCODING_ERRORS)
            return self._record_reference("U", row, table, image, True).encode("utf-8", _ENCODING_ERRORS)
        return self._record_reference(row.op, row, table, image, False).encode("utf-8", _ENCODING_ERRORS)

    def header(self, table: TableInfo) -> bytes:
        """The output-field-header line (b"" when output-field-header is off)."""
        if not self.output_field_header:
            return b""
        names = [HEADER_OPERATION, HEADER_TABLE, HEADER_SCHEMA]
        if self.include_commit_ts:
            names.append(HEADER_COMMIT_TS)
        if self.output_old_value:
            names.append(HEADER_IS_UPDATE)
        names.extend(table.column_names)
        return (self.delimiter.join(names) + self.terminator).encode("utf-8", _ENCODING_ERRORS)


def _escaper(delimiter: str) -> Callable[[str], str]:
    """Backslash-escape ``\\``, CR, LF and the delimiter (each of its characters)."""
    escaped_delim = "".join("\\" + ch for ch in delimiter)
    pattern = re.compile(re.escape(delimiter) + r"|[\\\r\n]")
    repl = {"\\": "\\\\", "\r": "\\r", "\n": "\\n", delimiter: escaped_delim}

    def sub(m: re.Match[str]) -> str:
        return repl[m.group()]

    def escape(s: str) -> str:
        return pattern.sub(sub, s)

    return escape


# ------------------------------------------------------------------ compiled encoders
#
# ``CSVEncoder.encode_row`` runs one function generated per table shape and options (the way
# capture/rowcodec.py compiles row decoders): the delimiter, quote and terminator are baked
# into a single f-string, each column has an inline snippet for its documented Python type,
# and anything else (NULL aside) goes to the column's reference renderer, so the bytes are
# those of ``encode_row_reference`` for every value.

_B64_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
_HEX_ALPHABET = frozenset("0123456789abcdef")
_FSTRING_PLAIN = frozenset(" ,;:|!#$%&()*+-./<=>?@[]^_`~'")

_Kind = tuple[str, int | None, bool]
_CODE_CACHE: dict[tuple[Any, ...], CodeType] = {}
_G32_CACHE: dict[float, str] = {}


def _column_kind(col: ColumnInfo) -> _Kind:
    """The snippet a column gets, in ``CSVEncoder._renderer``'s order of type tests.

    ``(name, decimal scale, NOT NULL)``: NOT NULL text columns are quoted inside the
    record's f-string on the fast path (a NULL there only sends the row to the general path).
    """
    t = col.type
    if t in INT_TYPES or t in ("year", "bit"):
        return ("int", None, not col.nullable)
    if t == "float":
        return ("f32", None, not col.nullable)
    if t == "double":
        return ("f64", None, not col.nullable)
    if t == "decimal":
        return ("dec", col.scale, not col.nullable)
    if t in BLOB_TYPES:
        return ("bin", None, not col.nullable)
    return ("str", None, not col.nullable)


def _handle_key_shape(table: TableInfo) -> tuple[tuple[int, ...], bool]:
    """(handle-key positions, whether it is one integer column): what ``_handle_key`` branches on."""
    idx = table.handle_key_index
    return idx, len(idx) == 1 and table.columns[idx[0]].type in INT_TYPES


def _g32(v: float) -> str:
    """``go_g_format(v, 32)``, remembered per value (±0 and NaN are not cached: they share keys)."""
    if v == 0.0 or v != v:
        return go_g_format(v, 32)
    text = _G32_CACHE.get(v)
    if text is None:
        if len(_G32_CACHE) >= 65536:
            _G32_CACHE.clear()
        text = _G32_CACHE[v] = go_g_format(v, 32)
    return text


def _literal(text: str) -> str:
    """``text`` as literal characters inside a double-quoted f-string of generated code."""
    out = []
    for ch in text:
        if ch in "{}":
            out.append(ch * 2)
        elif ch.isascii() and (ch.isalnum() or ch in _FSTRING_PLAIN):
            out.append(ch)
        else:
            out.append(f"\\U{ord(ch):08x}")
    return "".join(out)


class _SourceBuilder:
    """Generated source of ``encode(row) -> bytes`` for one table shape and options.

    A record is one f-string with the delimiters, quotes and terminator as literal text.
    Ints and floats are rendered in it (floats via ``repr`` where Go's ``%v`` agrees);
    text columns become a quoted or escaped temporary, except NOT NULL ones in quoted
    mode: when every such column holds its documented type the row takes a fast path
    whose f-string has their quotes as literals, so no temporary is built for them.
    """

    def __init__(
        self,
        kinds: tuple[_Kind, ...],
        quote: str,
        delimiter: str,
        terminator: str,
        binary_encoding: str,
        include_commit_ts: bool,
        output_old_value: bool,
        output_handle_key: bool,
        handle_key: tuple[tuple[int, ...], bool] | None = None,
    ) -> None:
        self.kinds = kinds
        self.handle_key = handle_key
        self.quote = quote
        self.delimiter = delimiter
        self.terminator = terminator
        self.binary_encoding = binary_encoding
        self.include_commit_ts = include_commit_ts
        self.output_old_value = output_old_value
        self.output_handle_key = output_handle_key

    def _text(self, i: int, kind: _Kind) -> tuple[str, list[str], str, frozenset[str] | None]:
        """(exact type, statements, variable, alphabet): the unquoted text of a text-like column."""
        v, t = f"v{i}", f"t{i}"
        name, scale, _ = kind
        if name == "dec":
            if scale is None:
                inexact = f"'E' in {t}"
            elif scale == 0:
                inexact = f"'E' in {t} or '.' in {t}"
            else:
                inexact = f"'E' in {t} or {t}[{-scale - 1}:{-scale}] != '.'"
            return (
                "Decimal",
                [f"{t} = str({v})", f"if {inexact}:", f"    {t} = _dec({v}, {scale!r})"],
                t,
                None,
            )
        if name == "bin":
            if self.binary_encoding == "hex":
                return "bytes", [f"{t} = {v}.hex()"], t, _HEX_ALPHABET
            return "bytes", [f"{t} = _b64({v}, newline=False).decode()"], t, _B64_ALPHABET
        return "str", [], v, None

    def _field(self, out: str, var: str, alphabet: frozenset[str] | None) -> list[str]:
        """Set ``out`` to the text in ``var`` as a quoted or escaped field (``alphabet``: all it can hold)."""
        if self.quote:
            q = _literal(self.quote)
            if alphabet is not None and self.quote not in alphabet:
                return [f'{out} = f"{q}{{{var}}}{q}"']
            return [f'{out} = f"{q}{{{var}}}{q}" if {self.quote!r} not in {var} else _s({var})']
        if alphabet is not None and not any(ch in alphabet for ch in self.delimiter):
            return [f"{out} = {var}"]
        specials = dict.fromkeys(["\\", "\r", "\n", self.delimiter])
        test = " or ".join(f"{sp!r} in {var}" for sp in specials)
        return [f"{out} = _s({var}) if {test} else {var}"]

    def _general(self, i: int, kind: _Kind, body: list[str]) -> str:
        """Append column ``i``'s statements to ``body``; return its part of the record f-string."""
        v, f = f"v{i}", f"f{i}"
        name = kind[0]
        fallback = [f"elif {v} is None:", f"    {f} = _NULL", "else:", f"    {f} = _r{i}({v})"]
        if name == "int":
            return f"{{{v} if type({v}) is int else _NULL if {v} is None else _r{i}({v})}}"
        if name == "f32":
            return f"{{_g32({v}) if type({v}) is float else _NULL if {v} is None else _r{i}({v})}}"
        if name == "f64":
            # Inside (-1e6, 1e6) Go's %v is fixed notation; so is repr, except below 1e-4.
            body += [
                f"if type({v}) is float and -1e6 < {v} < 1e6:",
                f"    {f} = repr({v})",
                f"    if {f}[-2:] == '.0':",
                f"        {f} = {f}[:-2]",
                f"    elif 'e' in {f}:",
                f"        {f} = _r{i}({v})",
                *fallback,
            ]
            return f"{{{f}}}"
        exact, lines, var, alphabet = self._text(i, kind)
        body += [f"if type({v}) is {exact}:", *("    " + x for x in lines + self._field(f, var, alphabet))]
        body += fallback
        return f"{{{f}}}"

    def _baked(self, i: int, kind: _Kind, body: list[str]) -> tuple[str, str]:
        """Column ``i`` on the fast path: (its type test, its part of the f-string with literal quotes)."""
        exact, lines, var, alphabet = self._text(i, kind)
        body += lines
        q = self.quote
        if alphabet is None or q in alphabet:
            body += [f"if {q!r} in {var}:", f"    {var} = {var}.replace({q!r}, {q * 2!r})"]
        return f"type(v{i}) is {exact}", f"{_literal(q)}{{{var}}}{_literal(q)}"

    def _handle_key_lines(self, image: str) -> list[str]:
        """Statements setting ``hk`` to the handle-key field (``CSVEncoder._handle_key``)."""
        idx, single_int = self.handle_key or ((), False)
        if not idx:
            return ["hk = _NULL"]
        if not single_int:
            return [f"hk = _hkc({image})"]
        v = f"v{idx[0]}"
        digits = set("0123456789-")
        if self.quote and self.quote not in digits:
            q = _literal(self.quote)
            return [f'hk = f"{q}{{{v}}}{q}" if type({v}) is int else _s(str({v}))']
        if not self.quote and not digits.intersection(self.delimiter):
            return [f"hk = {v} if type({v}) is int else _s(str({v}))"]
        return [f"hk = _s(str({v}))"]

    def _render(self, prefix: str, image: str, suffix: str) -> list[str]:
        """Statements that unpack ``image`` and return ``f"{prefix}<hk><values><terminator>"{suffix}``."""
        n = len(self.kinds)
        d = _literal(self.delimiter)
        end = _literal(self.terminator)
        lines = [f"{', '.join(f'v{i}' for i in range(n))}, = {image}"]
        hk = ""
        if self.output_handle_key:
            hk = f"{{hk}}{d}"
            lines += self._handle_key_lines(image)
        general: list[str] = []
        parts = [self._general(i, kind, general) for i, kind in enumerate(self.kinds)]
        bake = [i for i, k in enumerate(self.kinds) if self.quote and k[2] and k[0] in ("dec", "bin", "str")]
        if bake:
            fast: list[str] = []
            fast_parts = list(parts)
            tests = []
            for i in bake:
                test, fast_parts[i] = self._baked(i, self.kinds[i], fast)
                tests.append(test)
            # The other columns' statements, as on the general path.
            shared: list[str] = []
            for i, kind in enumerate(self.kinds):
                if i not in bake:
                    self._general(i, kind, shared)
            lines += [
                f"if {' and '.join(tests)}:",
                *("    " + x for x in fast + shared),
                f'    return f"{prefix}{hk}{d.join(fast_parts)}{end}"{suffix}',
            ]
        lines += [*general, f'return f"{prefix}{hk}{d.join(parts)}{end}"{suffix}']
        return lines

    def source(self) -> str:
        """The module text defining ``encode(row) -> bytes`` (and ``_values`` for output-old-value)."""
        n = len(self.kinds)
        d = _literal(self.delimiter)
        ct = f"{{ct}}{d}" if self.include_commit_ts else ""
        upd = f"{{upd}}{d}" if self.output_old_value else ""
        lines = []
        if self.output_old_value:
            # An UPDATE with its old value is two records, D then I, both is-update.
            lines += [
                "def _values(head, image):",
                *("    " + x for x in self._render("{head}", "image", "")),
                "",
            ]
        lines += [
            "def encode(row):",
            "    op = row.op",
            "    image = row.before if op == 'D' else row.after",
            f"    if image is None or len(image) != {n}:",
            "        return _ref(row, _T)",
            "    t = row.table",
            "    s = row.schema",
            "    ts = _TS if t == _TN and s == _SN else _ts(t, s)",
        ]
        if self.include_commit_ts:
            lines += ["    ct = row.commit_ts", "    if type(ct) is not int:", "        return _ref(row, _T)"]
        lines += ["    if op == 'U':"]
        if self.output_old_value:
            lines += [
                "        before = row.before",
                "        if before is not None:",
                f"            if len(before) != {n}:",
                "                return _ref(row, _T)",
                f'            text = _values(f"{{_OPD}}{d}{{ts}}{ct}true{d}", before)'
                f' + _values(f"{{_OPI}}{d}{{ts}}{ct}true{d}", image)',
                "            return text.encode('utf-8', 'surrogateescape')",
                "        upd = 'true'",
            ]
        lines += [
            "        opq = _OPU",
            "    else:",
            "        opq = _OPS.get(op)",
            "        if opq is None:",
            "            return _ref(row, _T)",
        ]
        if self.output_old_value:
            lines += ["        upd = 'false'"]
        render = self._render(f"{{opq}}{d}{{ts}}{ct}{upd}", "image", '.encode("utf-8", "surrogateescape")')
        lines += ["    " + x for x in render]
        return "\n".join(lines) + "\n"


def _compile_row_encoder(enc: CSVEncoder, table: TableInfo) -> Callable[[RowChange], bytes]:
    """Generate (or take from the cache) and bind ``encode(row) -> bytes`` for one table."""
    if not table.columns:
        return lambda row: enc.encode_row_reference(row, table)  # raises the reference's error
    kinds = tuple(_column_kind(c) for c in table.columns)
    key = (
        kinds,
        enc.quote,
        enc.delimiter,
        enc.terminator,
        enc.binary_encoding,
        enc.include_commit_ts,
        enc.output_old_value,
        enc.output_handle_key,
        _handle_key_shape(table) if enc.output_handle_key else None,
    )
    code = _CODE_CACHE.get(key)
    if code is None:
        src = _SourceBuilder(*key).source()
        code = compile(src, f"<csv encoder {len(kinds)} columns>", "exec")
        if len(_CODE_CACHE) > 1024:
            _CODE_CACHE.clear()
        _CODE_CACHE[key] = code
    s = enc.string
    d = enc.delimiter

    def ts(t: str, sc: str) -> str:
        return s(t) + d + s(sc) + d

    ns: dict[str, Any] = {
        "Decimal": Decimal,
        "_NULL": enc.null,
        "_s": s,
        "_g32": _g32,
        "_dec": decimal_text,
        "_b64": binascii.b2a_base64,
        "_hkc": enc._handle_key_fn(table),
        "_ref": enc.encode_row_reference,
        "_T": table,
        "_TN": table.table,
        "_SN": table.schema,
        "_TS": ts(table.table, table.schema),
        "_ts": ts,
        "_OPS": {op: s(op) for op in ("I", "U", "D")},
        "_OPD": s("D"),
        "_OPI": s("I"),
        "_OPU": s("U"),
    }
    for i, col in enumerate(table.columns):
        ns[f"_r{i}"] = enc._renderer(col)
    exec(code, ns)
    fn: Callable[[RowChange], bytes] = ns["encode"]
    return fn


# ------------------------------------------------------------------ decoder


@dataclass(frozen=True, slots=True)
class CSVRecord:
    """One decoded CSV record; ``values`` are the model's Python values for the table's columns."""

    op: Op
    table: str
    schema: str
    commit_ts: int | None
    is_update: bool | None
    handle_key: str | None
    values: tuple[Any, ...]

    def to_row_change(self, table: TableInfo, seq: int = 0) -> RowChange:
        """The row change this record stands for (I/U → after image, D → before image)."""
        before = self.values if self.op == "D" else None
        after = None if self.op == "D" else self.values
        return RowChange(
            op=self.op,
            schema=self.schema,
            table=self.table,
            table_version=table.version,
            commit_ts=self.commit_ts or 0,
            before=before,
            after=after,
            seq=seq,
        )


_Field = tuple[str | None, bool]  # (text, quoted); text None for NULL


class CSVDecoder:
    """Reads TiCDC CSV back into typed values (the inverse of ``CSVEncoder``)."""

    def __init__(
        self,
        csv: CSVConfig | None = None,
        terminator: str = "\r\n",
        include_commit_ts: bool | None = None,
        output_old_value: bool | None = None,
        output_handle_key: bool | None = None,
    ) -> None:
        csv = csv or CSVConfig()
        validate_csv_config(csv)
        if not terminator:
            raise ConfigError("csv terminator cannot be empty; use \\r\\n, \\n or \\r")
        self.csv = csv
        self.terminator = terminator
        self.delimiter = csv.delimiter
        self.quote = csv.quote
        self.null = csv.null
        self.include_commit_ts = csv.include_commit_ts if include_commit_ts is None else include_commit_ts
        self.output_old_value = csv.output_old_value if output_old_value is None else output_old_value
        self.output_handle_key = csv.output_handle_key if output_handle_key is None else output_handle_key
        self.binary_encoding = csv.binary_encoding_method
        if self.quote:
            self._special = re.compile(re.escape(self.delimiter) + "|" + re.escape(terminator))
        else:
            self._special = re.compile(r"\\|" + re.escape(self.delimiter) + "|" + re.escape(terminator))

    @classmethod
    def from_config(cls, cfg: ReplicaConfig) -> CSVDecoder:
        """Build from ``[sink]`` and ``[sink.csv]``."""
        return cls(cfg.sink.csv, cfg.sink.terminator)

    # -------------------------------------------------------------- parsing

    def records(self, data: bytes | str) -> Iterator[list[_Field]]:
        """Split raw CSV into records of (text, quoted) fields; NULL fields have text None."""
        s = data if isinstance(data, str) else data.decode("utf-8", _ENCODING_ERRORS)
        n = len(s)
        pos = 0
        quote, delim, term = self.quote, self.delimiter, self.terminator
        special = self._special
        while pos < n:
            fields: list[_Field] = []
            while True:
                if quote and s.startswith(quote, pos):
                    i = pos + 1
                    buf = []
                    while True:
                        j = s.find(quote, i)
                        if j < 0:
                            raise DecodeError(f"unterminated quoted CSV field starting at offset {pos}")
                        buf.append(s[i:j])
                        if s.startswith(quote, j + 1):
                            buf.append(quote)
                            i = j + 2
                            continue
                        pos = j + 1
                        break
                    fields.append(("".join(buf), True))
                elif quote:
                    m = special.search(s, pos)
                    end = m.start() if m else n
                    raw = s[pos:end]
                    fields.append((None if raw == self.null else raw, False))
                    pos = end
                else:
                    start = pos
                    parts = []
                    while True:
                        m = special.search(s, pos)
                        end = m.start() if m else n
                        parts.append(s[pos:end])
                        if m is not None and m.group() == "\\":
                            if end + 1 >= n:
                                raise DecodeError(f"CSV ends inside a backslash escape at offset {end}")
                            ch = s[end + 1]
                            parts.append("\n" if ch == "n" else "\r" if ch == "r" else ch)
                            pos = end + 2
                            continue
                        pos = end
                        break
                    raw = s[start:pos]
                    fields.append((None if raw == self.null else "".join(parts), False))
                if pos >= n:
                    yield fields
                    return
                if s.startswith(delim, pos):
                    pos += len(delim)
                    continue
                if s.startswith(term, pos):
                    pos += len(term)
                    yield fields
                    break
                raise DecodeError(
                    f"unexpected {s[pos : pos + 10]!r} after a CSV field at offset {pos}; "
                    f"expected the delimiter {delim!r} or the terminator {term!r}"
                )

    def decode(self, data: bytes | str, table: TableInfo) -> Iterator[CSVRecord]:
        """Decode every record of one table's CSV data (an output-field-header line is skipped)."""
        meta = 3 + int(self.include_commit_ts) + int(self.output_old_value) + int(self.output_handle_key)
        ncols = len(table.columns)
        converters = [self._converter(c) for c in table.columns]
        first = True
        for fields in self.records(data):
            if first:
                first = False
                if fields and fields[0] == (HEADER_OPERATION, False):
                    continue
            if len(fields) != meta + ncols:
                raise DecodeError(
                    f"CSV record has {len(fields)} fields but {meta} meta fields + {ncols} columns of "
                    f"{table.schema}.{table.table} (version {table.version}) were expected; check the "
                    "csv options (include-commit-ts, output-old-value, output-handle-key) and the table version"
                )
            op = fields[0][0]
            if op not in ("I", "U", "D"):
                raise DecodeError(f"invalid CSV operation type {op!r}; expected I, U or D")
            i = 3
            commit_ts: int | None = None
            if self.include_commit_ts:
                raw = fields[i][0]
                try:
                    commit_ts = int(raw or "")
                except ValueError:
                    raise DecodeError(
                        f"the 4th column({raw}) of csv row should be a valid commit-ts"
                    ) from None
                i += 1
            is_update: bool | None = None
            if self.output_old_value:
                is_update = fields[i][0] == "true"
                i += 1
            handle_key: str | None = None
            if self.output_handle_key:
                handle_key = fields[i][0]
                i += 1
            values = tuple(conv(f[0]) for conv, f in zip(converters, fields[i:], strict=True))
            yield CSVRecord(
                op=op,  # type: ignore[arg-type]
                table=fields[1][0] or "",
                schema=fields[2][0] or "",
                commit_ts=commit_ts,
                is_update=is_update,
                handle_key=handle_key,
                values=values,
            )

    def _converter(self, col: ColumnInfo) -> Callable[[str | None], Any]:
        t = col.type

        def wrap(fn: Callable[[str], Any]) -> Callable[[str | None], Any]:
            def conv(text: str | None) -> Any:
                if text is None:
                    return None
                try:
                    return fn(text)
                except (ValueError, InvalidOperation, binascii.Error) as exc:
                    raise DecodeError(
                        f"CSV value {text[:60]!r} is not a valid {t} for column {col.name!r}"
                    ) from exc

            return conv

        if t in INT_TYPES or t in ("year", "bit"):
            return wrap(int)
        if t == "float":
            return wrap(lambda x: to_float32(float(x)))
        if t == "double":
            return wrap(float)
        if t == "decimal":
            return wrap(Decimal)
        if t in BLOB_TYPES:
            if self.binary_encoding == "hex":
                return wrap(bytes.fromhex)
            return wrap(lambda x: base64.b64decode(x, validate=True))
        return wrap(lambda x: x)
