"""TiCDC's storage-sink CSV (``pkg/sink/codec/csv``): encoder beside decoder.

A record is ``op, table, schema[, commit-ts][, is-update][, handle-key], values…``
followed by the terminator. Strings are quoted (the quote doubled inside) or,
with an empty quote, backslash-escaped (``\\``, CR, LF and the delimiter);
other values are Go's ``%v`` (ints, shortest-``'g'`` floats, ``true``/``false``);
NULL is the null string, never quoted. DECIMAL, date/time and JSON are quoted
strings, ENUM/SET their names, binary base64 or lower-case hex.

Which kind of column is rendered how, and parsed back, is decided in ``csv_kinds``
(whose rules also give the SQL of the upstream-rendered snapshot, ``csv_sql``).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from operator import call
from typing import TYPE_CHECKING, Any

from sparkcdc.codec.base import CodecOptions, Encoder, KeyValue
from sparkcdc.codec.csv_kinds import ColumnKind, FieldStyle, Formatter, column_formatter, column_kind
from sparkcdc.codec.values import to_float32
from sparkcdc.config.replica import CSVConfig, ReplicaConfig
from sparkcdc.errors import ConfigError, DecodeError
from sparkcdc.model.events import Op, RowChange
from sparkcdc.model.schema import INT_TYPES, ColumnInfo, TableInfo

HEADER_OPERATION = "ticdc-meta$operation"
HEADER_TABLE = "ticdc-meta$table"
HEADER_SCHEMA = "ticdc-meta$schema"
HEADER_COMMIT_TS = "ticdc-meta$commit-ts"
HEADER_IS_UPDATE = "ticdc-meta$is-update"

_ENCODING_ERRORS = "surrogateescape"  # bytes that were not UTF-8 upstream travel through unchanged

if TYPE_CHECKING:
    from sparkcdc.codec._canaljson import CsvFields

try:
    from sparkcdc.codec import _canaljson as NATIVE
except ImportError:  # not built: records are rendered by the Python reference (the column formatters)
    NATIVE = None  # type: ignore[assignment]
"""The C extension whose ``CsvFields`` renders records; None when it is not built (tests set it to None
to run the reference: ``column_formatter`` per value, joined in Python)."""


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


class _CSVFormat:
    """The record format both directions share: ``[sink.csv]``, the terminator and the per-use overrides."""

    def __init__(
        self,
        csv: CSVConfig,
        terminator: str,
        include_commit_ts: bool | None,
        output_old_value: bool | None,
        output_handle_key: bool | None,
    ) -> None:
        self.csv = csv
        self.terminator = terminator
        self.delimiter = csv.delimiter
        self.quote = csv.quote
        self.null = csv.null
        self.include_commit_ts = csv.include_commit_ts if include_commit_ts is None else include_commit_ts
        self.output_old_value = csv.output_old_value if output_old_value is None else output_old_value
        self.output_handle_key = csv.output_handle_key if output_handle_key is None else output_handle_key


class CSVEncoder(_CSVFormat, Encoder):
    """Encodes row changes as TiCDC CSV records.

    Each table gets a row encoder (``row_encoder``) holding one formatter per column, chosen
    by the column's kind (``csv_kinds``), so encoding a row is one call per value and no test
    of the column's type.
    """

    protocol = "csv"

    @classmethod
    def build(cls, config: ReplicaConfig, options: CodecOptions) -> CSVEncoder:
        """The encoder of a sink (``codec.base.build_encoder``): CSV reads only the config."""
        return cls.from_config(config)

    def value_encoder(self, row: RowChange, table: TableInfo) -> Callable[[RowChange], bytes]:
        """``row_encoder(table)``: a row change is one keyless value (one or two records)."""
        return self.row_encoder(table)

    def messages(self, row: RowChange, table: TableInfo, topic: str = "") -> list[KeyValue]:
        """The row's records as one keyless value."""
        return [(None, self.encode_row(row, table))]

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
        _CSVFormat.__init__(self, csv, terminator, include_commit_ts, output_old_value, output_handle_key)
        self.output_field_header = csv.output_field_header
        self.binary_encoding = csv.binary_encoding_method
        self.style = FieldStyle(self.quote, self.delimiter, self.null, self.binary_encoding)
        self.string = self.style.string()
        self._encoders: dict[int, tuple[TableInfo, Callable[[RowChange], bytes]]] = {}

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
        state["_encoders"] = {}
        state.pop("string", None)  # a closure: made again on unpickling
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.string = self.style.string()

    def encode_row(self, row: RowChange, table: TableInfo) -> bytes:
        """One record, or two (D then I, both is-update) for an UPDATE with output-old-value."""
        return self.row_encoder(table)(row)

    def encode_rows(self, rows: Iterable[RowChange], table: TableInfo) -> list[bytes]:
        """``encode_row`` for each row of one table (its row encoder is looked up once)."""
        return list(map(self.row_encoder(table), rows))

    def row_encoder(self, table: TableInfo) -> Callable[[RowChange], bytes]:
        """``encode_row`` bound to one table (made on first use, then cached)."""
        entry = self._encoders.get(id(table))
        if entry is None or entry[0] is not table:
            if len(self._encoders) > 4096:
                self._encoders.clear()
            entry = self._encoders[id(table)] = (table, _table_encoder(self, table))
        return entry[1]

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


def _table_encoder(enc: CSVEncoder, table: TableInfo) -> Callable[[RowChange], bytes]:
    """``encode_row`` for one table: its column formatters and record heads made once."""
    if not table.columns:

        def no_columns(row: RowChange) -> bytes:
            raise DecodeError(f"table {row.schema}.{row.table} has no columns; cannot encode a CSV row")

        return no_columns
    formatters = [column_formatter(c, enc.style) for c in table.columns]
    n = len(formatters)
    fields = native_fields(enc, table, formatters)
    d, end, string = enc.delimiter, enc.terminator, enc.string
    with_commit_ts, with_is_update = enc.include_commit_ts, enc.output_old_value
    handle_key = _handle_key_formatter(enc, table) if enc.output_handle_key else None
    name, schema = table.table, table.schema
    # op, table and schema fields of the table's own records (a routed row may carry other names)
    own_heads = {op: d.join([string(op), string(name), string(schema), ""]) for op in ("I", "U", "D")}

    def record(op: str, row: RowChange, image: tuple[Any, ...], is_update: bool) -> bytes:
        head = own_heads.get(op) if row.table == name and row.schema == schema else None
        if head is None:
            head = d.join([string(op), string(row.table), string(row.schema), ""])
        if with_commit_ts:
            head += str(row.commit_ts) + d
        if with_is_update:
            head += ("true" if is_update else "false") + d
        if handle_key is not None:
            head += handle_key(image) + d
        if fields is not None:
            out = fields.record(head, image, end)
            if out is not None:
                return out
            # None: not a tuple (the C code takes tuples only); the reference renders it
        return (head + d.join(map(call, formatters, image)) + end).encode("utf-8", _ENCODING_ERRORS)

    def encode(row: RowChange) -> bytes:
        op = row.op
        image = row.before if op == "D" else row.after
        if image is None or len(image) != n:
            raise _image_error(row, table, image)
        if op != "U":
            return record(op, row, image, False)
        if with_is_update and row.before is not None:
            if len(row.before) != n:
                raise _image_error(row, table, row.before)
            return record("D", row, row.before, True) + record("I", row, image, True)
        return record(op, row, image, True)

    return encode


def native_fields(enc: CSVEncoder, table: TableInfo, formatters: list[Formatter]) -> CsvFields | None:
    """The C renderer of ``table``'s value fields (``_canaljson.CsvFields``), None when not built.

    Each column's kind picks the C rule for the value type the model gives it; every other
    value goes through the column's formatter, the reference of its text.
    """
    if NATIVE is None:
        return None
    kinds = {
        ColumnKind.INT: NATIVE.F_INT,
        ColumnKind.BIT_YEAR: NATIVE.F_INT,
        ColumnKind.FLOAT: NATIVE.F_OTHER,
        ColumnKind.DOUBLE: NATIVE.F_DOUBLE,
        ColumnKind.DECIMAL: NATIVE.F_DECIMAL,
        ColumnKind.TEMPORAL: NATIVE.F_TEXT,
        ColumnKind.TEXT: NATIVE.F_TEXT,
        ColumnKind.BINARY: NATIVE.F_BINARY,
        ColumnKind.OTHER: NATIVE.F_TEXT,
    }
    columns = []
    for col, fmt in zip(table.columns, formatters, strict=True):
        kind = kinds[column_kind(col)]
        scale = col.scale if kind == NATIVE.F_DECIMAL and col.scale is not None else -1
        columns.append((kind, scale, fmt))
    return NATIVE.CsvFields(
        columns,
        Decimal,
        enc.delimiter.encode("utf-8"),
        enc.quote.encode("utf-8"),
        enc.null.encode("utf-8", _ENCODING_ERRORS),
        enc.binary_encoding == "hex",
    )


def _image_error(row: RowChange, table: TableInfo, image: tuple[Any, ...] | None) -> DecodeError:
    if image is None:
        return DecodeError(
            f"{row.op} row change for {row.schema}.{row.table} at commit_ts {row.commit_ts} has no "
            "row image; the capture must emit full row images"
        )
    return DecodeError(
        f"row for {row.schema}.{row.table} has {len(image)} values but the table has "
        f"{len(table.columns)} columns at version {table.version}"
    )


def _handle_key_formatter(enc: CSVEncoder, table: TableInfo) -> Callable[[tuple[Any, ...]], str]:
    """The handle-key field of a row image: one integer key as a string, others as ``{a, b}``."""
    idx = table.handle_key_index
    string, binary, null = enc.string, enc.style.binary(), enc.null
    if not idx:
        return lambda image: null
    if len(idx) == 1 and table.columns[idx[0]].type in INT_TYPES:
        i = idx[0]
        return lambda image: string(str(image[i]))

    def composite(image: tuple[Any, ...]) -> str:
        parts = []
        for i in idx:
            v = image[i]
            parts.append(binary(v) if isinstance(v, bytes) else "" if v is None else str(v))
        return string("{" + ", ".join(parts) + "}")

    return composite


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


class CSVDecoder(_CSVFormat):
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
        _CSVFormat.__init__(self, csv, terminator, include_commit_ts, output_old_value, output_handle_key)
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
        for fields, _end in self._records(s):
            yield fields

    def record_sizes(self, data: bytes) -> Iterator[tuple[list[_Field], int]]:
        """Each record of raw CSV with its size in bytes (terminator included)."""
        s = data.decode("utf-8", _ENCODING_ERRORS)
        start = 0
        for fields, end in self._records(s):
            yield fields, len(s[start:end].encode("utf-8", _ENCODING_ERRORS))
            start = end

    def _records(self, s: str) -> Iterator[tuple[list[_Field], int]]:
        """``records`` over text: each record with the offset just past it."""
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
                    yield fields, pos
                    return
                if s.startswith(delim, pos):
                    pos += len(delim)
                    continue
                if s.startswith(term, pos):
                    pos += len(term)
                    yield fields, pos
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

        kind = column_kind(col)
        if kind is ColumnKind.INT or kind is ColumnKind.BIT_YEAR:
            return wrap(int)
        if kind is ColumnKind.FLOAT:
            return wrap(lambda x: to_float32(float(x)))
        if kind is ColumnKind.DOUBLE:
            return wrap(float)
        if kind is ColumnKind.DECIMAL:
            return wrap(Decimal)
        if kind is ColumnKind.BINARY:
            if self.binary_encoding == "hex":
                return wrap(bytes.fromhex)
            return wrap(lambda x: base64.b64decode(x, validate=True))
        return wrap(lambda x: x)
